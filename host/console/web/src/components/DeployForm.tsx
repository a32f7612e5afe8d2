// Deploys an uploaded module, or uploads a .wasm file and deploys it, on one pipeline.
import { useRef, useState } from 'preact/hooks';
import * as api from '../api';
import { describeReport, moduleNameOf, shortDigest } from '../format';
import { usePoll } from '../hooks';
import { OutcomeText, Problem, type Outcome } from './Problem';

export function DeployForm({ status, onDone }: { status: api.PipelineStatus; onDone: () => void }) {
  const { tenant, name } = status;
  const modules = usePoll((signal) => api.modules(tenant, signal));
  const [choice, setChoice] = useState('');
  const [file, setFile] = useState<File | null>(null);
  const [sampleRows, setSampleRows] = useState('');
  const [resetState, setResetState] = useState(false);
  const [shadow, setShadow] = useState(false);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    const rows = sampleRows.trim() === '' ? undefined : Number(sampleRows);
    if (rows !== undefined && !(Number.isInteger(rows) && rows >= 0)) {
      setOutcome({ text: 'Sample rows must be a whole number.', failed: true });
      return;
    }
    if (!file && !choice) {
      setOutcome({ text: 'Pick an uploaded module or a .wasm file.', failed: true });
      return;
    }
    setBusy(true);
    setOutcome(null);
    try {
      let digest = choice;
      if (file) {
        digest = (await api.uploadModule(tenant, moduleNameOf(file), file)).digest;
        setFile(null);
        fileInput.current!.value = '';
        modules.reload();
      }
      if (shadow) {
        const report = await api.startShadow(tenant, name, digest);
        setShadow(false);
        setOutcome({ text: `The shadow of ${report.candidate_name} started; its comparison shows above.`, failed: false });
      } else {
        const report = await api.deploy(tenant, name, digest, rows, resetState);
        setResetState(false);
        setOutcome({ text: describeReport(report), failed: false });
      }
    } catch (error) {
      setOutcome({ text: api.messageOf(error), failed: true });
    }
    setBusy(false);
    onDone();
  };

  return (
    <form class="deploy" onSubmit={submit}>
      <div class="grid">
        <label>
          Uploaded module
          <select
            data-testid="deploy-module"
            value={choice}
            disabled={!!file}
            onChange={(e) => setChoice(e.currentTarget.value)}
          >
            <option value="">Choose a module…</option>
            {(modules.data ?? []).map((m) => (
              <option key={m.digest} value={m.digest}>
                {m.name} · {shortDigest(m.digest)}
                {m.digest === status.module.digest ? ' (running)' : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          or a new .wasm file
          <input
            type="file"
            accept=".wasm,application/wasm"
            data-testid="deploy-file"
            ref={fileInput}
            onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)}
          />
        </label>
        <label>
          Sample rows (optional)
          <input
            type="number"
            min="0"
            step="1"
            placeholder="e.g. 100"
            data-testid="deploy-sample-rows"
            value={sampleRows}
            onInput={(e) => setSampleRows(e.currentTarget.value)}
          />
        </label>
      </div>
      <label>
        <input
          type="checkbox"
          data-testid="deploy-shadow"
          checked={shadow}
          onChange={(e) => setShadow(e.currentTarget.checked)}
        />
        Run in the shadow first: beside the live module, its records compared, not produced
        {status.changelog_topic && ' (on a copy of the state)'}
      </label>
      {status.changelog_topic && !shadow && (
        <label>
          <input
            type="checkbox"
            data-testid="deploy-reset-state"
            checked={resetState}
            onChange={(e) => setResetState(e.currentTarget.checked)}
          />
          Start with empty state (the current state is deleted)
        </label>
      )}
      <button type="submit" data-testid="deploy-submit" disabled={busy} aria-busy={busy}>
        {shadow ? (file ? 'Upload and shadow' : 'Start the shadow') : file ? 'Upload and deploy' : 'Deploy'}
      </button>
      <Problem message={modules.error} />
      <OutcomeText outcome={outcome} testid="deploy-result" />
    </form>
  );
}
