import * as api from '../api';
import { Problem } from '../components/Problem';
import { bytes, duration } from '../format';
import { REFRESH_MS, usePoll } from '../hooks';

const MIB = 1024 * 1024;

export function Operator() {
  const { data, error } = usePoll((signal) => api.host(signal), REFRESH_MS);

  return (
    <section data-testid="operator-page">
      <header class="row">
        <h1>Host</h1>
        {data && <small class="muted">up {duration(data.uptime_seconds)}</small>}
      </header>
      <Problem message={error} />
      {data && <HostView host={data} />}
    </section>
  );
}

function HostView({ host }: { host: api.HostStatus }) {
  const { memory, limits } = host;
  return (
    <>
      <div class="grid">
        <article data-testid="host-memory">
          <h3>Memory</h3>
          <dl>
            <dt>Resident (RSS)</dt>
            <dd>{memory.rss_bytes == null ? 'unknown' : bytes(memory.rss_bytes)}</dd>
            <dt>Reserved for modules</dt>
            <dd>
              {bytes(memory.reserved_guest_mib * MIB)} of {bytes(memory.max_guest_mib * MIB)}
              <progress value={memory.reserved_guest_mib} max={memory.max_guest_mib} />
            </dd>
          </dl>
        </article>
        <article>
          <h3>Limits</h3>
          <dl>
            <dt>Pipelines</dt>
            <dd>{limits.max_pipelines}</dd>
            <dt>Module memory, in all</dt>
            <dd>{bytes(limits.max_memory_mib * MIB)}</dd>
            <dt>Module size</dt>
            <dd>{bytes(limits.max_module_mib * MIB)}</dd>
          </dl>
        </article>
      </div>
      <h2>Tenants</h2>
      <div class="overflow-auto">
        <table class="striped" data-testid="host-tenants">
          <thead>
            <tr>
              <th>Tenant</th>
              <th class="number">Running</th>
              <th class="number">Paused</th>
              <th class="number">Failed</th>
              <th>Pipelines of limit</th>
              <th>Module memory reserved</th>
              <th class="number">Per pipeline at most</th>
            </tr>
          </thead>
          <tbody>
            {host.tenants.map((t) => {
              const pipelines = t.running + t.paused + t.failed + t.finished;
              return (
                <tr key={t.tenant}>
                  <td>{t.tenant}</td>
                  <td class="number">{t.running}</td>
                  <td class="number">{t.paused}</td>
                  <td class={t.failed > 0 ? 'number bad' : 'number'}>{t.failed}</td>
                  <td>
                    {pipelines} of {t.max_pipelines}
                    <progress value={pipelines} max={t.max_pipelines} />
                  </td>
                  {/* A tenant's memory limit caps each pipeline, not their sum. */}
                  <td>{bytes(t.reserved_guest_mib * MIB)}</td>
                  <td class="number">{bytes(t.max_memory_mib * MIB)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </>
  );
}
