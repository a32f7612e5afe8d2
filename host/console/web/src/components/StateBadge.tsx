import type { State } from '../api';

export function StateBadge({ state }: { state: State }) {
  return (
    <span class={`state state-${state}`} data-testid="pipeline-state">
      {state}
    </span>
  );
}
