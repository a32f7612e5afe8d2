import * as api from '../api';
import { Problem } from '../components/Problem';
import { usePoll } from '../hooks';
import { Breadcrumb } from '../components/Breadcrumb';

export function DeadLetters({ tenant, name }: { tenant: string; name: string }) {
  // Read on demand, not polled: each read opens a Kafka consumer in the service.
  const { data, error, reload } = usePoll((signal) => api.deadLetters(tenant, name, signal));

  return (
    <section>
      <Breadcrumb tenant={tenant} name={name} page="Dead letters" />
      <header class="row">
        <h1>Dead letters</h1>
        {data?.topic && <small class="muted">newest first, from topic {data.topic}</small>}
        <button class="outline push" type="button" onClick={reload} data-testid="dead-letters-refresh">
          Refresh
        </button>
      </header>
      <Problem message={error} />
      {data && data.topic === null && (
        <p>
          This pipeline keeps no dead letters: rows its module rejects are not sent anywhere. To keep them, set{' '}
          <code>on_error = "dead-letter"</code> in its <code>[transform]</code> config.
        </p>
      )}
      {data?.topic && data.letters.length === 0 && <p class="muted">No dead letters.</p>}
      {data?.topic && data.letters.length > 0 && <LetterTable letters={data.letters} />}
      {data?.skipped ? (
        <p class="muted">
          {data.skipped} other records of the topic are not letters of this pipeline's table and are not shown.
        </p>
      ) : null}
    </section>
  );
}

function LetterTable({ letters }: { letters: api.DeadLetter[] }) {
  return (
    <div class="overflow-auto">
      <table class="striped letters" data-testid="dead-letters-table">
        <thead>
          <tr>
            <th>Version</th>
            <th>Row</th>
            <th>Change</th>
            <th>Committed</th>
            <th>Error</th>
            <th>Key</th>
            <th>Row data</th>
            <th>Partition/offset</th>
          </tr>
        </thead>
        <tbody>
          {letters.map(({ partition, offset, key, letter }) => (
            <tr key={`${partition}/${offset}`} data-testid="dead-letter" data-version={letter.version} data-row={letter.row}>
              <td>{letter.version}</td>
              <td>{letter.row}</td>
              <td>{letter.change_type}</td>
              <td>{letter.commit_timestamp ?? '—'}</td>
              <td>
                <strong>{letter.error_kind}</strong>
                <div class="wrap" data-testid="dead-letter-error">
                  {letter.error}
                </div>
              </td>
              <td>
                <code>{key ?? '—'}</code>
              </td>
              <td>
                <pre data-testid="dead-letter-data">{JSON.stringify(letter.data, null, 2)}</pre>
              </td>
              <td>
                {partition}/{offset}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
