import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, messageOf } from './api';

export const REFRESH_MS = 5000;

interface Polled<T> {
  data?: T;
  /** The last load's failure; the previous data is kept meanwhile. */
  error?: string;
  reload: () => void;
}

/**
 * Loads data on mount and again `every` ms after each load finishes (never
 * overlapping); `reload` loads now. Leaving the page aborts a load under way. The
 * latest `load` is used, so it may close over changing props. When the data is gone
 * (404: deleted while shown), the old data is dropped rather than shown as current.
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
        if (!controller.signal.aborted) {
          const gone = error instanceof ApiError && error.status === 404;
          setState((s) => ({ data: gone ? undefined : s.data, error: messageOf(error) }));
        }
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
