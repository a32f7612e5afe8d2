// A pipeline's guest log, followed live: the kept lines first, then new ones.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { logStream, messageOf, readLines, type LogLine } from '../api';
import { clock, shortDigest } from '../format';

/** Lines kept in memory; older ones drop off the top. */
const MAX_LINES = 500;

interface Numbered {
  seq: number;
  line: LogLine;
}

export function Logs({ tenant, name }: { tenant: string; name: string }) {
  const [lines, setLines] = useState<Numbered[]>([]);
  const [status, setStatus] = useState('Connecting…');
  const [ended, setEnded] = useState(false);
  const [attempt, setAttempt] = useState(0);
  const box = useRef<HTMLDivElement>(null);
  // Follow the newest line unless the reader scrolled up to read older ones.
  const atBottom = useRef(true);

  useEffect(() => {
    const controller = new AbortController();
    let seq = 0;
    setLines([]);
    setEnded(false);
    setStatus('Connecting…');
    (async () => {
      try {
        const response = await logStream(tenant, name, controller.signal);
        setStatus('Following');
        await readLines<LogLine>(response, (batch) => {
          const numbered = batch.map((line) => ({ seq: seq++, line }));
          setLines((old) => [...old, ...numbered].slice(-MAX_LINES));
        });
        setStatus('The log stream ended.');
      } catch (error) {
        if (controller.signal.aborted) return;
        setStatus(messageOf(error));
      }
      setEnded(true);
    })();
    return () => controller.abort();
  }, [tenant, name, attempt]);

  useLayoutEffect(() => {
    const element = box.current;
    if (element && atBottom.current) element.scrollTop = element.scrollHeight;
  }, [lines]);

  const onScroll = () => {
    const element = box.current!;
    atBottom.current = element.scrollHeight - element.scrollTop - element.clientHeight < 24;
  };

  return (
    <section>
      <header class="row">
        <h2>Logs</h2>
        <small class="muted">{status}</small>
        {ended && (
          <button class="outline secondary small" onClick={() => setAttempt((a) => a + 1)}>
            Reconnect
          </button>
        )}
      </header>
      <div class="logs" data-testid="logs" ref={box} onScroll={onScroll}>
        {lines.length === 0 && <div class="muted">No lines yet.</div>}
        {lines.map(({ seq, line }) => (
          <div key={seq} class={`log-line level-${line.level}`} data-testid="log-line">
            <time>{clock(line.at_ms)}</time>
            <span class="level">{line.level}</span>
            <span class="digest" title={line.module}>
              {shortDigest(line.module)}
            </span>
            <span class="message">{line.message}</span>
          </div>
        ))}
      </div>
    </section>
  );
}
