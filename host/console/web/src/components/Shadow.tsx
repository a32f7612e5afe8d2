// A pipeline's shadow deploy: the candidate's comparison with the live module, live,
// with promote and discard.
import { useState } from 'preact/hooks';
import * as api from '../api';
import { bytes, count, describeReport, shortDigest } from '../format';
import { REFRESH_MS, usePoll } from '../hooks';
import { OutcomeText, Problem, type Outcome } from './Problem';

export function Shadow({ status, onDone }: { status: api.PipelineStatus; onDone: () => void }) {
  const { tenant, name } = status;
  const shadow = usePoll((signal) => api.shadow(tenant, name, signal), REFRESH_MS);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const report = shadow.data;
  if (!report) return <Problem message={shadow.error} />;

  const act = async (action: () => Promise<string>) => {
    setBusy(true);
    setOutcome(null);
    try {
      setOutcome({ text: await action(), failed: false });
    } catch (error) {
      setOutcome({ text: api.messageOf(error), failed: true });
    }
    setBusy(false);
    shadow.reload();
    onDone();
  };

  return (
    <section data-testid="shadow" data-phase={report.phase}>
      <header class="row">
        <h2>Shadow</h2>
        <span class="muted">
          {report.candidate_name} <code title={report.candidate}>{shortDigest(report.candidate)}</code> beside{' '}
          <code title={report.live}>{shortDigest(report.live)}</code>
        </span>
      </header>
      <p data-testid="shadow-summary">
        {report.phase}
        {report.reason && ` (${report.reason})`}: compared {count(report.batches)} batches, {count(report.rows)} change
        rows
        {report.through && ` through version ${report.through.version}`}
        {report.skipped_batches > 0 && `; skipped ${count(report.skipped_batches)} the candidate was too far behind for`}.
      </p>
      <table data-testid="shadow-counts">
        <thead>
          <tr>
            <th>Topic</th>
            <th>Equal</th>
            <th>Changed</th>
            <th>Added</th>
            <th>Missing</th>
          </tr>
        </thead>
        <tbody>
          {Object.entries(report.topics).map(([topic, c]) => (
            <tr key={topic} data-testid="shadow-topic" data-topic={topic}>
              <td>{topic}</td>
              <td>{count(c.equal)}</td>
              <td>{count(c.changed)}</td>
              <td>{count(c.added)}</td>
              <td>{count(c.missing)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted">
        Rows failed by the live module only: {count(report.rejections.live_only)}, by the candidate only:{' '}
        {count(report.rejections.candidate_only)}; batches the candidate failed: {count(report.failed_batches)}. Time in
        the module: live {count(report.live_cost.transform_ms)} ms, candidate {count(report.candidate_cost.transform_ms)}{' '}
        ms; output {bytes(report.live_cost.output_bytes)} against {bytes(report.candidate_cost.output_bytes)}.
      </p>
      {report.state && (
        <p class="muted" data-testid="shadow-state">
          State: the candidate works on a copy of {count(report.state.copied_keys)} keys (
          {bytes(report.state.copied_bytes)}, copied in {count(report.state.copy_ms)} ms), {count(report.state.keys)}{' '}
          keys now. Keys changed alike: {count(report.state.changes_equal)}, differently:{' '}
          {count(report.state.changes_differ)}, by the live module only: {count(report.state.live_only)}, by the
          candidate only: {count(report.state.candidate_only)}.
        </p>
      )}
      {report.errors.map((e, i) => (
        <p key={i} class="problem">
          At version {e.position.version}: {e.error}
        </p>
      ))}
      {report.differences.length > 0 && (
        <details data-testid="shadow-differences">
          <summary>{count(report.differences.length)} differences (first kept)</summary>
          {report.differences.map((d, i) => (
            <pre key={i} class="diff">
              {`@@ version ${d.version} row ${d.row}: ${d.kind}\n`}
              {d.error && `${d.error}\n`}
              {diffLines(d.live, d.candidate)}
            </pre>
          ))}
        </details>
      )}
      <div class="actions">
        <button
          data-testid="shadow-promote"
          disabled={busy || report.phase === 'stopped'}
          onClick={() => act(async () => describeReport(await api.promoteShadow(tenant, name)))}
        >
          Promote
        </button>
        <button
          data-testid="shadow-discard"
          class="secondary"
          disabled={busy}
          onClick={() => act(async () => (await api.discardShadow(tenant, name), 'Discarded.'))}
        >
          Discard
        </button>
        <OutcomeText outcome={outcome} testid="shadow-result" />
      </div>
    </section>
  );
}

/** The fields of two records that differ: `-` the live one, `+` the candidate's. */
function diffLines(live: api.ShadowRecord | null, candidate: api.ShadowRecord | null): string {
  const fields = ['topic', 'partition', 'key', 'value', 'headers'] as const;
  const shown = (v: unknown) => (v == null ? '(none)' : typeof v === 'string' ? v : JSON.stringify(v));
  let out = '';
  for (const field of fields) {
    const a = live?.[field];
    const b = candidate?.[field];
    if (live && candidate && JSON.stringify(a) === JSON.stringify(b)) continue;
    if (live) out += `- ${field}: ${shown(a)}\n`;
    if (candidate) out += `+ ${field}: ${shown(b)}\n`;
  }
  return out;
}
