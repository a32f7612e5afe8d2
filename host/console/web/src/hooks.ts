import { useEffect, useRef, useState } from 'preact/hooks';
import { messageOf } from './api';

export const REFRESH_MS = 5000;

export interface Polled<T> {
  data?: T;
  /** The last load's failure; the previous data is kept meanwhile. */
  error?: string;
  reload: () => void;
}

/**
 * Loads data on mount and again `every` ms after each load finishes (never
 * overlapping); `reload` loads now. Leaving the page aborts a load under way.
 * Pages are keyed by route, so `load` is fixed for a component's life.
 */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, every?: number): Polled<T> {
  const [state, setState] = useState<{ data?: T; error?: string }>({});
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const data = await loadRef.current(controller.signal);
        if (!controller.signal.aborted) setState({ data });
      } catch (error) {
        if (!controller.signal.aborted) setState((s) => ({ data: s.data, error: messageOf(error) }));
      }
      if (!controller.signal.aborted && every) timer = setTimeout(run, every);
    };
    run();
    return () => {
      controller.abort();
      clearTimeout(timer);
    };
  }, [tick, every]);

  return { ...state, reload: () => setTick((t) => t + 1) };
}
