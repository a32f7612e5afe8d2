// Failures and outcomes, always shown as plain text.

export interface Outcome {
  text: string;
  failed: boolean;
}

export function Problem({ message, testid }: { message?: string | null; testid?: string }) {
  if (!message) return null;
  return (
    <p class="problem" role="alert" data-testid={testid}>
      {message}
    </p>
  );
}

/** What an action did, or why it was refused. */
export function OutcomeText({ outcome, testid }: { outcome: Outcome | null; testid: string }) {
  if (!outcome) return null;
  return (
    <p class={outcome.failed ? 'problem' : 'done'} role="status" data-testid={testid}>
      {outcome.text}
    </p>
  );
}
