// Uploads a .wasm module for a tenant (the operator picks which).
import { useState } from 'preact/hooks';
import * as api from '../api';
import { moduleNameOf, shortDigest } from '../format';
import { OutcomeText, type Outcome } from './Problem';

export function UploadForm({ tenants, onDone }: { tenants: string[]; onDone: () => void }) {
  const [tenant, setTenant] = useState(tenants[0] ?? '');
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    if (!file) {
      setOutcome({ text: 'Pick a .wasm file.', failed: true });
      return;
    }
    setBusy(true);
    setOutcome(null);
    try {
      const module = await api.uploadModule(tenant, name.trim() || moduleNameOf(file), file);
      setOutcome({ text: `Uploaded ${module.name} (${shortDigest(module.digest)}).`, failed: false });
      onDone();
    } catch (error) {
      setOutcome({ text: api.messageOf(error), failed: true });
    }
    setBusy(false);
  };

  return (
    <form class="upload" onSubmit={submit}>
      <div class="grid">
        {tenants.length > 1 && (
          <label>
            Tenant
            <select data-testid="upload-tenant" value={tenant} onChange={(e) => setTenant(e.currentTarget.value)}>
              {tenants.map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          .wasm file
          <input
            type="file"
            accept=".wasm,application/wasm"
            data-testid="upload-file"
            onChange={(e) => {
              const picked = e.currentTarget.files?.[0] ?? null;
              setFile(picked);
              if (picked && !name) setName(moduleNameOf(picked));
            }}
          />
        </label>
        <label>
          Name
          <input data-testid="upload-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
      </div>
      <button type="submit" data-testid="upload-submit" disabled={busy} aria-busy={busy}>
        Upload
      </button>
      <OutcomeText outcome={outcome} testid="upload-result" />
    </form>
  );
}
