// Hash routes: the service serves one index.html, and nothing secret is ever in a URL.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'pipelines' }
  | { page: 'pipeline'; tenant: string; name: string }
  | { page: 'dead-letters'; tenant: string; name: string }
  | { page: 'modules' }
  | { page: 'operator' }
  | { page: 'sign-in' }
  | { page: 'not-found'; path: string };

function parse(hash: string): Route {
  const path = hash.replace(/^#/, '') || '/';
  let parts: string[];
  try {
    parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    // A hand-typed address with a stray `%`.
    return { page: 'not-found', path };
  }
  if (parts.length === 0) return { page: 'pipelines' };
  if (parts.length === 1 && ['modules', 'operator', 'sign-in'].includes(parts[0])) {
    return { page: parts[0] as 'modules' | 'operator' | 'sign-in' };
  }
  if (parts[0] === 'tenants' && parts[2] === 'pipelines' && parts.length >= 4) {
    const [, tenant, , name, rest] = parts;
    if (parts.length === 4) return { page: 'pipeline', tenant, name };
    if (parts.length === 5 && rest === 'dead-letters') return { page: 'dead-letters', tenant, name };
  }
  return { page: 'not-found', path };
}

const seg = encodeURIComponent;

export const href = {
  pipelines: '#/',
  modules: '#/modules',
  operator: '#/operator',
  signIn: '#/sign-in',
  pipeline: (tenant: string, name: string) => `#/tenants/${seg(tenant)}/pipelines/${seg(name)}`,
  deadLetters: (tenant: string, name: string) =>
    `#/tenants/${seg(tenant)}/pipelines/${seg(name)}/dead-letters`,
};

export function go(to: string): void {
  location.hash = to;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parse(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parse(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
