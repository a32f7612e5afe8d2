// Replays a range of a pipeline's table, by version or by commit time, through its
// module or another into a topic of its own: a pipeline of its own that finishes.
import { useState } from 'preact/hooks';
import * as api from '../api';
import { shortDigest } from '../format';
import { usePoll } from '../hooks';
import { href } from '../router';
import { OutcomeText, Problem, type Outcome } from './Problem';

/** A version number or an RFC 3339 time, as typed. */
function end(text: string): api.ReplayEnd | null {
  const t = text.trim();
  if (/^\d+$/.test(t)) return { version: Number(t) };
  return Number.isNaN(Date.parse(t)) ? null : { timestamp: new Date(t).toISOString() };
}

export function ReplayForm({ status, onDone }: { status: api.PipelineStatus; onDone: () => void }) {
  const { tenant, name } = status;
  const modules = usePoll((signal) => api.modules(tenant, signal));
  const [from, setFrom] = useState('');
  const [to, setTo] = useState(String(status.latest_version));
  const [topic, setTopic] = useState('');
  const [module, setModule] = useState('');
  const [deadLetters, setDeadLetters] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const [started, setStarted] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    const [first, last] = [end(from), end(to)];
    if (!first || !last) {
      setOutcome({ text: 'Each end is a version number or a time such as 2026-12-01T00:00:00Z.', failed: true });
      return;
    }
    if (!topic.trim()) {
      setOutcome({ text: 'Name the topic the replay sends to.', failed: true });
      return;
    }
    setBusy(true);
    setOutcome(null);
    try {
      const replay = await api.replay(tenant, name, {
        from: first,
        to: last,
        topic: topic.trim(),
        module: module || undefined,
        dead_letter_topic: deadLetters.trim() || undefined,
      });
      setStarted(replay.name);
      setOutcome({ text: `Replay ${replay.name} started; it finishes after version ${replay.ending_version}.`, failed: false });
    } catch (error) {
      setOutcome({ text: api.messageOf(error), failed: true });
    }
    setBusy(false);
    onDone();
  };

  return (
    <form class="deploy" onSubmit={submit} data-testid="replay-form">
      <div class="grid">
        <label>
          From (version or time)
          <input data-testid="replay-from" placeholder="e.g. 3" value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
        </label>
        <label>
          Through (version or time)
          <input data-testid="replay-to" value={to} onInput={(e) => setTo(e.currentTarget.value)} />
        </label>
        <label>
          Into topic
          <input data-testid="replay-topic" value={topic} onInput={(e) => setTopic(e.currentTarget.value)} />
        </label>
        <label>
          Module
          <select data-testid="replay-module" value={module} onChange={(e) => setModule(e.currentTarget.value)}>
            <option value="">The pipeline's ({shortDigest(status.module.digest)})</option>
            {(modules.data ?? []).map((m) => (
              <option key={m.digest} value={m.digest}>
                {m.name} · {shortDigest(m.digest)}
              </option>
            ))}
          </select>
        </label>
        {status.dead_letter_topic && (
          <label>
            Dead-letter topic of its own
            <input value={deadLetters} onInput={(e) => setDeadLetters(e.currentTarget.value)} />
          </label>
        )}
      </div>
      <button type="submit" data-testid="replay-submit" disabled={busy} aria-busy={busy}>
        Replay
      </button>
      <Problem message={modules.error} />
      <OutcomeText outcome={outcome} testid="replay-result" />
      {started && (
        <a href={href.pipeline(tenant, started)} data-testid="replay-link">
          Follow {started} →
        </a>
      )}
    </form>
  );
}
