import * as api from '../api';
import type { Identity } from '../auth';
import { Problem } from '../components/Problem';
import { UploadForm } from '../components/UploadForm';
import { ago, bytes, dateTime, shortDigest } from '../format';
import { usePoll } from '../hooks';
import { href } from '../router';

interface TenantModules {
  tenant: string;
  modules: api.Module[];
}

async function load(identity: Identity, signal: AbortSignal): Promise<TenantModules[]> {
  const tenants = await api.visibleTenants(identity, signal);
  const lists = await Promise.all(tenants.map((tenant) => api.modules(tenant, signal)));
  return tenants.map((tenant, i) => ({
    tenant,
    modules: lists[i].sort((a, b) => b.uploaded_at - a.uploaded_at),
  }));
}

export function Modules({ identity }: { identity: Identity }) {
  const { data, error, reload } = usePoll((signal) => load(identity, signal));
  const operator = identity.role === 'operator';

  return (
    <section>
      <h1>Modules</h1>
      <Problem message={error} />
      {data?.map(({ tenant, modules }) => (
        <section key={tenant}>
          {operator && <h2>{tenant}</h2>}
          {modules.length === 0 ? (
            <p class="muted">No modules uploaded.</p>
          ) : (
            <ModuleTable tenant={tenant} modules={modules} />
          )}
        </section>
      ))}
      {data && data.length > 0 && (
        <article>
          <h2>Upload a module</h2>
          <UploadForm tenants={data.map((t) => t.tenant)} onDone={reload} />
        </article>
      )}
    </section>
  );
}

function ModuleTable({ tenant, modules }: TenantModules) {
  return (
    <div class="overflow-auto">
      <table class="striped" data-testid="modules-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Digest</th>
            <th class="number">Size</th>
            <th>Language</th>
            <th>Contract</th>
            <th>Uploaded</th>
            <th>Used by</th>
          </tr>
        </thead>
        <tbody>
          {modules.map((m) => (
            <tr key={m.digest} data-testid="module-row" data-digest={m.digest}>
              <td class="module-name">{m.name}</td>
              <td>
                <code title={m.digest}>{shortDigest(m.digest)}</code>
              </td>
              <td class="number">{bytes(m.size_bytes)}</td>
              <td>{m.language ?? 'unknown'}</td>
              <td>{m.contract}</td>
              <td title={dateTime(m.uploaded_at * 1000)}>{ago(m.uploaded_at * 1000)}</td>
              <td>
                {(m.used_by ?? []).length === 0 && <span class="muted">unused</span>}
                {(m.used_by ?? []).map((name, i) => (
                  <span key={name}>
                    {i > 0 && ', '}
                    <a href={href.pipeline(tenant, name)}>{name}</a>
                  </span>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
