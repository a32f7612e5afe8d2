// Who is signed in. The token lives in sessionStorage only (gone when the tab
// closes) and leaves the page only as an Authorization header (see api.ts).
import { useEffect, useState } from 'preact/hooks';

export type Identity = { role: 'operator' } | { role: 'tenant'; tenant: string };

interface Session {
  token: string | null;
  /** Known once `whoami` answered for the token. */
  identity: Identity | null;
  /** Why the caller was signed out, shown on the sign-in page. */
  notice: string | null;
}

const KEY = 'sluice.token';

let session: Session = { token: sessionStorage.getItem(KEY), identity: null, notice: null };
const listeners = new Set<() => void>();

function update(next: Partial<Session>): void {
  session = { ...session, ...next };
  listeners.forEach((listener) => listener());
}

export function currentToken(): string | null {
  return session.token;
}

export function signIn(token: string, identity: Identity): void {
  sessionStorage.setItem(KEY, token);
  update({ token, identity, notice: null });
}

export function setIdentity(identity: Identity): void {
  update({ identity });
}

/** Forgets the token; `notice` says why on the sign-in page. */
export function signOut(notice: string | null = null): void {
  sessionStorage.removeItem(KEY);
  update({ token: null, identity: null, notice });
}

export function clearNotice(): void {
  if (session.notice) update({ notice: null });
}

export function useSession(): Session {
  const [state, setState] = useState(session);
  useEffect(() => {
    const listener = () => setState(session);
    listeners.add(listener);
    listener(); // catch a change made between render and subscription
    return () => void listeners.delete(listener);
  }, []);
  return state;
}

export function describe(identity: Identity): string {
  return identity.role === 'operator' ? 'operator' : `tenant ${identity.tenant}`;
}
