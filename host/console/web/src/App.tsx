import { useEffect, useState } from 'preact/hooks';
import { messageOf, whoami } from './api';
import { describe, setIdentity, signOut, useSession, type Identity } from './auth';
import { Problem } from './components/Problem';
import { DeadLetters } from './pages/DeadLetters';
import { Modules } from './pages/Modules';
import { Operator } from './pages/Operator';
import { Pipeline } from './pages/Pipeline';
import { Pipelines } from './pages/Pipelines';
import { SignIn } from './pages/SignIn';
import { go, href, useRoute, type Route } from './router';

export function App() {
  const session = useSession();
  const route = useRoute();
  const [problem, setProblem] = useState<string | null>(null);
  const [attempt, setAttempt] = useState(0);

  // After a reload only the token is known: ask who it is.
  useEffect(() => {
    if (!session.token || session.identity) return;
    setProblem(null);
    whoami(session.token).then(setIdentity, (error) => setProblem(messageOf(error)));
  }, [session.token, session.identity, attempt]);

  useEffect(() => {
    if (session.token && route.page === 'sign-in') go(href.pipelines);
  }, [session.token, route.page]);

  if (!session.token) return <SignIn notice={session.notice} />;
  if (!session.identity) {
    return (
      <main class="container">
        {problem ? (
          <>
            <Problem message={problem} />
            <button onClick={() => setAttempt((a) => a + 1)}>Try again</button>
          </>
        ) : (
          <p aria-busy="true">Signing in…</p>
        )}
      </main>
    );
  }

  const identity = session.identity;
  return (
    <>
      <header class="container">
        <nav>
          <ul>
            <li>
              <strong class="brand">Sluice</strong>
            </li>
            <NavLink to={href.pipelines} current={['pipelines', 'pipeline', 'dead-letters'].includes(route.page)}>
              Pipelines
            </NavLink>
            <NavLink to={href.modules} current={route.page === 'modules'}>
              Modules
            </NavLink>
            {identity.role === 'operator' && (
              <NavLink to={href.operator} current={route.page === 'operator'}>
                Operator
              </NavLink>
            )}
          </ul>
          <ul>
            <li>
              <small class="muted">signed in as </small>
              <strong data-testid="signed-in-as">{describe(identity)}</strong>
            </li>
            <li>
              <button
                class="outline secondary small"
                data-testid="sign-out"
                onClick={() => {
                  signOut();
                  go(href.signIn);
                }}
              >
                Sign out
              </button>
            </li>
          </ul>
        </nav>
      </header>
      <main class="container">
        <Page route={route} identity={identity} />
      </main>
    </>
  );
}

function NavLink({ to, current, children }: { to: string; current: boolean; children: string }) {
  return (
    <li>
      <a href={to} aria-current={current ? 'page' : undefined}>
        {children}
      </a>
    </li>
  );
}

// Pages are keyed by what they show so that moving between pipelines starts afresh.
function Page({ route, identity }: { route: Route; identity: Identity }) {
  switch (route.page) {
    case 'pipelines':
    case 'sign-in':
      return <Pipelines identity={identity} />;
    case 'pipeline':
      return <Pipeline key={`${route.tenant}/${route.name}`} tenant={route.tenant} name={route.name} />;
    case 'dead-letters':
      return <DeadLetters key={`${route.tenant}/${route.name}`} tenant={route.tenant} name={route.name} />;
    case 'modules':
      return <Modules identity={identity} />;
    case 'operator':
      return identity.role === 'operator' ? <Operator /> : <Problem message="This page is for the operator." />;
    case 'not-found':
      return <Problem message={`There is no page ${route.path}.`} />;
  }
}
