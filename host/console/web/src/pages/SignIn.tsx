import { useState } from 'preact/hooks';
import { ApiError, messageOf, whoami } from '../api';
import { clearNotice, signIn } from '../auth';
import { go, href } from '../router';

/** `notice` says why the caller was signed out (a refused token). */
export function SignIn({ notice }: { notice: string | null }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    clearNotice();
    const typed = token.trim();
    if (!typed) {
      setError('Type a token to sign in.');
      return;
    }
    setBusy(true);
    try {
      const identity = await whoami(typed);
      signIn(typed, identity);
      go(href.pipelines);
    } catch (failure) {
      // A refused token is said by the notice the API call left.
      if (!(failure instanceof ApiError && failure.status === 401)) setError(messageOf(failure));
      setBusy(false);
    }
  };

  const shown = error ?? notice;
  return (
    <main class="container sign-in">
      <article>
        <header>
          <h1>Sluice console</h1>
          <p class="muted">Sign in with an operator or tenant token.</p>
        </header>
        <form onSubmit={submit}>
          <label>
            Token
            <input
              type="password"
              name="token"
              autocomplete="off"
              data-testid="sign-in-token"
              value={token}
              onInput={(e) => setToken(e.currentTarget.value)}
              aria-invalid={shown ? true : undefined}
            />
          </label>
          {shown && (
            <p class="problem" role="alert" data-testid="sign-in-error">
              {shown}
            </p>
          )}
          <button type="submit" data-testid="sign-in-submit" disabled={busy} aria-busy={busy}>
            Sign in
          </button>
        </form>
      </article>
    </main>
  );
}
