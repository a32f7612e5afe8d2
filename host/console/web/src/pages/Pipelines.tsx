import * as api from '../api';
import type { Identity } from '../auth';
import { Problem } from '../components/Problem';
import { Sparkline } from '../components/Sparkline';
import { StateBadge } from '../components/StateBadge';
import { ago, count, shortDigest } from '../format';
import { REFRESH_MS, usePoll } from '../hooks';
import { href } from '../router';

interface Row {
  status: api.PipelineStatus;
  /** Recent rows per second; unset when the history could not be had. */
  rates?: number[];
}

/** Points in a sparkline: the last five minutes. */
const SPARK_POINTS = 60;

async function load(identity: Identity, signal: AbortSignal): Promise<Row[]> {
  const tenants = await api.visibleTenants(identity, signal);
  // Lists and recent histories at once, one call each per tenant.
  const [lists, histories] = await Promise.all([
    Promise.allSettled(tenants.map((tenant) => api.pipelines(tenant, signal))),
    Promise.allSettled(tenants.map((tenant) => api.tenantHistory(tenant, SPARK_POINTS, signal))),
  ]);
  const rows: Row[] = [];
  tenants.forEach((_, i) => {
    const list = lists[i];
    if (list.status === 'rejected') {
      // A tenant removed since the tenants were listed drops out; other failures show.
      if (list.reason instanceof api.ApiError && list.reason.status === 404) return;
      throw list.reason;
    }
    // A missing history only blanks the sparklines.
    const history = histories[i];
    const recent = history.status === 'fulfilled' ? history.value.pipelines : {};
    for (const status of list.value) {
      rows.push({ status, rates: recent[status.name]?.map((p) => p.rows_per_second) });
    }
  });
  return rows.sort((a, b) => a.status.tenant.localeCompare(b.status.tenant) || a.status.name.localeCompare(b.status.name));
}

export function Pipelines({ identity }: { identity: Identity }) {
  const { data, error } = usePoll((signal) => load(identity, signal), REFRESH_MS);
  const operator = identity.role === 'operator';

  return (
    <section>
      <header class="row">
        <h1>Pipelines</h1>
        <small class="muted">refreshes every 5 s</small>
      </header>
      <Problem message={error} />
      {data && data.length === 0 && <p class="muted">No pipelines yet.</p>}
      {data && data.length > 0 && (
        <div class="overflow-auto">
          <table class="striped" data-testid="pipelines-table">
            <thead>
              <tr>
                {operator && <th>Tenant</th>}
                <th>Name</th>
                <th>State</th>
                <th>Module</th>
                <th class="number">Rows/s</th>
                <th class="number">Lag</th>
                <th>Errors</th>
                <th>Last swap</th>
                <th>Last hour</th>
              </tr>
            </thead>
            <tbody>
              {data.map(({ status: s, rates }) => (
                <tr key={`${s.tenant}/${s.name}`} data-testid="pipeline-row" data-pipeline={`${s.tenant}/${s.name}`}>
                  {operator && <td>{s.tenant}</td>}
                  <td>
                    <a href={href.pipeline(s.tenant, s.name)}>{s.name}</a>
                  </td>
                  <td>
                    <StateBadge state={s.state} />
                  </td>
                  <td>
                    <span class="module-name">{s.module.name}</span> <code title={s.module.digest}>{shortDigest(s.module.digest)}</code>
                    {s.module.language && <small class="muted"> {s.module.language}</small>}
                  </td>
                  <td class="number">{count(s.rows_per_second)}</td>
                  <td class="number">{count(s.lag_versions)}</td>
                  <td>
                    <ErrorCounts counters={s.counters} />
                  </td>
                  <td>{s.last_swap ? ago(s.last_swap.at_ms) : 'never'}</td>
                  <td>{rates ? <Sparkline values={rates} label={`rows per second of ${s.name}`} /> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function ErrorCounts({ counters: c }: { counters: api.Counters }) {
  const kinds: [string, number][] = [
    ['rows', c.failed_rows],
    ['batches', c.failed_batches],
    ['traps', c.traps],
  ];
  return (
    <span class="errors" title="failed rows · failed batches · traps">
      {kinds.map(([label, n], i) => (
        <span key={label} class={n > 0 ? 'bad' : 'muted'}>
          {i > 0 && ' · '}
          {count(n)} {label}
        </span>
      ))}
    </span>
  );
}
