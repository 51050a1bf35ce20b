import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { AuditPage } from './pages/audit';
import { ChannelsPage } from './pages/channels';
import { GenerationsPage } from './pages/generations';
import { KeysPage } from './pages/keys';
import { ProjectsPage } from './pages/projects';
import { TokensPage } from './pages/tokens';
import { UsagePage } from './pages/usage';
import { WebhooksPage } from './pages/webhooks';
import { consoleHref, currentPath, followLink } from './navigation';
import type { Schemas } from './api';
import { type Session, resumeSession, signIn, signOut, ssoIssuers } from './session';
import { ErrorNote, Field } from './ui';
import './styles.css';

/** The console's pages: path segment under /console/, link name, scope that opens it. */
const PAGES = [
  { path: 'keys', name: 'Keys', scope: 'keys:read', Page: KeysPage },
  { path: 'projects', name: 'Projects', scope: 'projects:read', Page: ProjectsPage },
  { path: 'usage', name: 'Usage', scope: 'usage:read', Page: UsagePage },
  { path: 'channels', name: 'Channels', scope: 'channels:read', Page: ChannelsPage },
  { path: 'generations', name: 'Generations', scope: 'generations:read', Page: GenerationsPage },
  { path: 'webhooks', name: 'Webhooks', scope: 'webhooks:read', Page: WebhooksPage },
  { path: 'audit-log', name: 'Audit log', scope: 'audit:read', Page: AuditPage },
  { path: 'admin-tokens', name: 'Admin tokens', scope: 'tokens:write', Page: TokensPage },
] as const;

function SignIn({ onSignedIn }: { onSignedIn: (session: Session) => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string>();
  const [issuers, setIssuers] = useState<Schemas['ConsoleSsoIssuer'][]>([]);
  useEffect(() => {
    ssoIssuers().then(setIssuers);
  }, []);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      onSignedIn(await signIn(token.trim()));
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    }
  };
  return (
    <main class="signin">
      <h1>Creative Gateway console</h1>
      {issuers.length > 0 && (
        <ul class="sso" aria-label="Single sign-on">
          {issuers.map((issuer) => (
            <li key={issuer.id}>
              <a class="button" href={issuer.sign_in_path}>
                Sign in with {issuer.name}
              </a>
            </li>
          ))}
        </ul>
      )}
      <form onSubmit={submit}>
        <Field
          label="Admin token"
          type="password"
          value={token}
          onInput={setToken}
          required
          hint="An admin token (hyadm_…) or the admin secret. Kept in this tab only."
        />
        <button type="submit">Sign in</button>
      </form>
      <ErrorNote message={error} />
      <p class="hint">
        Behind Cloudflare Access with <code>CF_ACCESS_ADMIN_SCOPES</code> set, the console signs you in with your Access login, no token needed; a token typed
        here acts as itself.
      </p>
    </main>
  );
}

function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [path, setPath] = useState(currentPath());
  useEffect(() => {
    resumeSession().then((resumed) => setSession(resumed ?? null));
    const onPop = () => setPath(currentPath());
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, []);
  if (session === undefined) return <p role="status">Loading…</p>;
  if (session === null) return <SignIn onSignedIn={setSession} />;

  const open = PAGES.filter((page) => session.can(page.scope));
  const page = open.find((p) => p.path === path) ?? open[0]!;
  const { identity } = session;
  return (
    <div class="shell">
      <header>
        <span class="brand">Creative Gateway</span>
        <nav aria-label="Console">
          <ul>
            {open.map((p) => (
              <li key={p.path}>
                <a href={consoleHref(p.path)} aria-current={p === page ? 'page' : undefined} onClick={(event) => followLink(event, p.path)}>
                  {p.name}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {identity.kind === 'admin_secret'
            ? 'admin secret'
            : identity.kind === 'access'
              ? `Signed in through Cloudflare Access as ${identity.name ?? ''}`
              : identity.kind === 'console_session'
                ? `Signed in as ${identity.name ?? ''}`
                : `${identity.name ?? ''} (${identity.actor})`}
          <button
            type="button"
            class="secondary"
            onClick={() => {
              signOut(session).finally(() => setSession(null));
            }}
          >
            Sign out
          </button>
        </span>
      </header>
      {identity.kind === 'admin_secret' && (
        <p class="notice warning" role="note">
          Signed in with the admin secret, which can do everything. A scoped admin token (Admin tokens page) is better: it opens only what its holder needs,
          expires and can be revoked.
        </p>
      )}
      <main>
        <h1>{page.name}</h1>
        <page.Page session={session} />
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
