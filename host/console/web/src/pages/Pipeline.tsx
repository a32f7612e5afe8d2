import * as api from '../api';
import { Chart } from '../components/Chart';
import { DeployForm } from '../components/DeployForm';
import { Logs } from '../components/Logs';
import { PipelineActions } from '../components/PipelineActions';
import { ReplayForm } from '../components/ReplayForm';
import { Shadow } from '../components/Shadow';
import { Problem } from '../components/Problem';
import { StateBadge } from '../components/StateBadge';
import { ago, bytes, count, shortDigest } from '../format';
import { REFRESH_MS, usePoll } from '../hooks';
import { href } from '../router';
import { Breadcrumb } from '../components/Breadcrumb';

interface Loaded {
  status: api.PipelineStatus;
  /** The history, or why it could not be had (the status still shows). */
  history: api.History | string;
}

async function load(tenant: string, name: string, signal: AbortSignal): Promise<Loaded> {
  const [status, history] = await Promise.all([
    api.pipeline(tenant, name, signal),
    api.history(tenant, name, signal).catch((error) => {
      if (error instanceof api.ApiError && error.status === 401) throw error;
      return api.messageOf(error);
    }),
  ]);
  return { status, history };
}

export function Pipeline({ tenant, name }: { tenant: string; name: string }) {
  const { data, error, reload } = usePoll((signal) => load(tenant, name, signal), REFRESH_MS);

  return (
    <section>
      <Breadcrumb tenant={tenant} name={name} />
      <Problem message={error} />
      {data && <PipelineView status={data.status} history={data.history} reload={reload} />}
    </section>
  );
}

function PipelineView({ status: s, history, reload }: Loaded & { reload: () => void }) {
  const c = s.counters;
  return (
    <>
      <header class="row">
        <h1>{s.name}</h1>
        <StateBadge state={s.state} />
        <a class="push" href={href.deadLetters(s.tenant, s.name)} data-testid="dead-letters-link">
          Dead letters →
        </a>
      </header>
      {s.state !== 'running' && s.state !== 'finished' && (
        <p class={s.error ? 'problem' : 'muted'}>
          Stopped at version {s.position.version}, row {s.position.row_offset}
          {s.error ? ': ' : '.'}
          {s.error && <span data-testid="pipeline-error">{s.error}</span>}
        </p>
      )}
      {s.state === 'running' && s.waiting && (
        <p class="problem" data-testid="pipeline-waiting">
          {s.waiting.message}
        </p>
      )}
      {s.ending_version != null && <Ending status={s} />}
      <PipelineActions status={s} onDone={reload} />

      <div class="grid facts">
        <article>
          <h3>Module</h3>
          <dl>
            <dt>Name</dt>
            <dd class="module-name">{s.module.name}</dd>
            <dt>Digest</dt>
            <dd>
              <code data-testid="module-digest">{s.module.digest}</code>
            </dd>
            <dt>Language</dt>
            <dd>{s.module.language ?? 'unknown'}</dd>
            {s.module.size_bytes != null && (
              <>
                <dt>Size</dt>
                <dd>{bytes(s.module.size_bytes)}</dd>
              </>
            )}
            <dt>Previous</dt>
            <dd>{s.previous_module ? <code title={s.previous_module}>{shortDigest(s.previous_module)}</code> : 'none'}</dd>
            <dt>Swaps</dt>
            <dd>
              <span data-testid="swaps">{c.swaps}</span>
              {s.last_swap && `, last ${ago(s.last_swap.at_ms)}`}
              {c.swaps > 0 && ` (held ${count(c.last_swap_pause_seconds * 1000)} ms)`}
            </dd>
          </dl>
        </article>
        <article>
          <h3>Stream</h3>
          <dl>
            <dt>Position</dt>
            <dd>
              version {s.position.version}, row {s.position.row_offset}
              {s.position.snapshot && ' (snapshot)'}
            </dd>
            <dt>Lag</dt>
            <dd>
              {count(s.lag_versions)} {s.lag_versions === 1 ? 'version' : 'versions'} behind (latest {s.latest_version})
            </dd>
            <dt>Rows/s</dt>
            <dd>{count(s.rows_per_second)}</dd>
            <dt>Table</dt>
            <dd class="wrap">{s.table}</dd>
            <dt>Topic</dt>
            <dd>{s.topic}</dd>
            <dt>Dead letters</dt>
            <dd>{s.dead_letter_topic ?? 'not kept'}</dd>
            <dt>Node</dt>
            <dd>{s.node ?? 'this service'}</dd>
          </dl>
        </article>
        {s.changelog_topic && (
          <article data-testid="state">
            <h3>State</h3>
            <dl>
              <dt>Keys</dt>
              <dd data-testid="state-keys">{count(c.state.keys)}</dd>
              <dt>Size</dt>
              <dd>{bytes(c.state.bytes)}</dd>
              <dt>Changelog</dt>
              <dd class="wrap">{s.changelog_topic}</dd>
              <dt>Restore</dt>
              <dd data-testid="state-restore">
                {c.state.restore_read < c.state.restore_total
                  ? `restoring: ${count(c.state.restore_read)} of ${count(c.state.restore_total)} changelog offsets`
                  : `${count(c.state.restore_total)} changelog offsets in ${c.state.restore_seconds.toFixed(1)} s`}
              </dd>
            </dl>
          </article>
        )}
        <article>
          <h3>Counters</h3>
          <dl>
            <dt>Rows in / records out</dt>
            <dd>
              {count(c.rows_in)} / {count(c.records_out)} ({bytes(c.bytes_out)})
            </dd>
            <dt>Failed rows / batches / traps</dt>
            <dd>
              {count(c.failed_rows)} / {count(c.failed_batches)} / {count(c.traps)}
            </dd>
            <dt>Host limits hit</dt>
            <dd>{count(c.host_limits)}</dd>
            <dt>Retries: sink / registry / source</dt>
            <dd>
              {count(c.sink_retries)} / {count(c.registry_retries)} / {count(c.source_retries)}
            </dd>
            <dt>Storage requests (failed)</dt>
            <dd>
              {count(c.storage_requests)} ({count(c.storage_failures)})
            </dd>
            <dt>Batches / guest time</dt>
            <dd>
              {count(c.batches)} / {count(c.guest_seconds)} s
            </dd>
          </dl>
        </article>
      </div>

      {typeof history === 'string' ? <Problem message={`No history: ${history}`} /> : <Charts history={history} />}

      <Shadow status={s} onDone={reload} />

      <section>
        <h2>Deploy</h2>
        <DeployForm status={s} onDone={reload} />
      </section>

      {s.ending_version == null && (
        <section>
          <h2>Replay</h2>
          <p class="muted">
            Send a range of the table again, through this module or another, into a topic of its own: a pipeline of
            its own, exactly once, that finishes after its last version. This pipeline carries on.
          </p>
          <ReplayForm status={s} onDone={reload} />
        </section>
      )}

      <Logs tenant={s.tenant} name={s.name} />

      <details>
        <summary>Config</summary>
        <pre>{s.config}</pre>
      </details>
    </>
  );
}

const BLUE = '#2060df';
const GREEN = '#1f8a4c';
const ORANGE = '#c4620e';
const RED = '#c62828';
const PURPLE = '#7b3fb5';

function Charts({ history }: { history: api.History }) {
  const points = history.points;
  const times = points.map((p) => p.at_ms / 1000);
  const last = points.at(-1);
  const values = (pick: (p: api.HistoryPoint) => number) => points.map(pick);
  return (
    <section>
      <header class="row">
        <h2>Last hour</h2>
        <small class="muted">one point every {history.interval_seconds} s</small>
      </header>
      <div class="charts">
        <figure data-testid="throughput-chart" data-points={points.length} data-last-rows-per-second={last?.rows_per_second}>
          <figcaption>Throughput (per second)</figcaption>
          <Chart
            times={times}
            format={count}
            series={[
              { label: 'rows', color: BLUE, values: values((p) => p.rows_per_second) },
              { label: 'records', color: GREEN, values: values((p) => p.records_per_second) },
            ]}
          />
        </figure>
        <figure data-testid="lag-chart" data-points={points.length}>
          <figcaption>Lag (versions)</figcaption>
          <Chart times={times} format={count} series={[{ label: 'lag', color: ORANGE, values: values((p) => p.lag_versions) }]} />
        </figure>
        <figure data-testid="latency-chart">
          <figcaption>Time in the module per batch (ms, mean)</figcaption>
          <Chart
            times={times}
            format={count}
            series={[{ label: 'per batch', color: PURPLE, values: values((p) => p.guest_seconds_per_batch * 1000) }]}
          />
        </figure>
        <figure data-testid="guest-chart">
          <figcaption>Time in the module (share of each second)</figcaption>
          <Chart
            times={times}
            format={(v) => `${count(v * 100)}%`}
            series={[{ label: 'guest share', color: GREEN, values: values((p) => p.guest_share) }]}
          />
        </figure>
        <figure data-testid="errors-chart">
          <figcaption>Errors (failed rows, batches and traps)</figcaption>
          <Chart times={times} format={count} series={[{ label: 'errors', color: RED, values: values((p) => p.errors) }]} />
        </figure>
      </div>
    </section>
  );
}

/** How far a pipeline with an ending version (a replay) is. */
function Ending({ status: s }: { status: api.PipelineStatus }) {
  const last = s.ending_version!;
  const done = s.state === 'finished' ? last : Math.min(Math.max(s.position.version - 1, 0), last);
  return (
    <p data-testid="replay-progress">
      {s.state === 'finished' ? 'Finished' : 'Delivering'} through version {last}: version {done} of {last} done,{' '}
      {count(s.counters.rows_in)} change rows delivered.
      <progress value={s.state === 'finished' ? 1 : done / Math.max(last, 1)} max={1} />
    </p>
  );
}
