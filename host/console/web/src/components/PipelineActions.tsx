// Pause, resume and rollback of one pipeline.
import { useState } from 'preact/hooks';
import * as api from '../api';
import { describeReport } from '../format';
import { OutcomeText, type Outcome } from './Problem';

export function PipelineActions({ status, onDone }: { status: api.PipelineStatus; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const { tenant, name, state } = status;

  const act = async (action: () => Promise<string>) => {
    setBusy(true);
    setOutcome(null);
    try {
      setOutcome({ text: await action(), failed: false });
    } catch (error) {
      setOutcome({ text: api.messageOf(error), failed: true });
    }
    setBusy(false);
    onDone();
  };

  return (
    <div class="actions">
      <button
        data-testid="pause"
        class="secondary"
        disabled={busy || state !== 'running'}
        onClick={() => act(async () => (await api.pause(tenant, name), 'Paused.'))}
      >
        Pause
      </button>
      <button
        data-testid="resume"
        disabled={busy || state === 'running'}
        onClick={() => act(async () => (await api.resume(tenant, name), 'Resumed.'))}
      >
        Resume
      </button>
      <button
        data-testid="rollback"
        class="outline"
        disabled={busy || !status.previous_module}
        title={status.previous_module ? `Back to ${status.previous_module}` : 'No previous module'}
        onClick={() => act(async () => describeReport(await api.rollback(tenant, name)))}
      >
        Rollback
      </button>
      <OutcomeText outcome={outcome} testid="action-result" />
    </div>
  );
}
