import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';

/**
 * A real OpenID Provider (oidc-provider) for the console single sign-on tests, in a process of its own
 * (test/helpers/oidc-test-provider.mjs): its clients `gateway` (secret CLIENT_SECRET) and
 * `gateway-public` (PKCE only) redirect to `<redirectBase>/console/sso/callback`.
 */
export const CLIENT_SECRET = 'gateway-client-secret-0123456789';

export interface TestProvider {
  issuer: string;
  process: ChildProcess;
  setUser(user: { sub: string; email: string; groups: string[] }): Promise<void>;
  rotateKey(): Promise<void>;
  /** Registers the gateway at `base` as the client's redirect and post-logout URIs. */
  redirectTo(base: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startProvider(redirectBase = 'https://console.example.test'): Promise<TestProvider> {
  const child = fork(path.join(__dirname, 'oidc-test-provider.mjs'), {
    env: { ...process.env, OIDC_TEST_REDIRECT_URI: `${redirectBase}/console/sso/callback`, OIDC_TEST_POST_LOGOUT_URI: `${redirectBase}/console` },
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
  });
  const issuer = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { issuer: string }).issuer));
    child.once('exit', (code) => reject(new Error(`the test OpenID Provider exited (${code})`)));
  });
  const post = async (at: string, body?: unknown) => {
    const res = await fetch(`${issuer}${at}`, { method: 'POST', body: JSON.stringify(body ?? {}) });
    if (!res.ok) throw new Error(`${at}: ${res.status}`);
  };
  return {
    issuer,
    process: child,
    setUser: (user) => post('/test/user', user),
    rotateKey: () => post('/test/rotate'),
    redirectTo: (base) => post('/test/client', { redirectUri: `${base}/console/sso/callback`, postLogoutUri: `${base}/console` }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill();
      }),
  };
}
