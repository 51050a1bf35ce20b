import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';

export type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/** A team's signing key as the test makes it: the private half signs, the public JWK goes to the JWKS. */
export async function makeKey(kid: string): Promise<{ kid: string; privateKey: PrivateKey; jwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

/** A local stand-in for `https://<team>.cloudflareaccess.com/cdn-cgi/access/certs`. */
export async function startJwksServer(): Promise<{ url: string; keys: JWK[]; fetches: () => number; failing: { value: boolean }; close(): Promise<void> }> {
  const keys: JWK[] = [];
  const failing = { value: false };
  let fetches = 0;
  const server = http.createServer((req, res) => {
    fetches += 1;
    if (failing.value || req.url !== '/cdn-cgi/access/certs') {
      res.writeHead(failing.value ? 500 : 404).end();
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/cdn-cgi/access/certs`,
    keys,
    fetches: () => fetches,
    failing,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
type SecuredOperation = { operationId?: string; security?: Array<Record<string, string[]>> };

/**
 * Every operation of a bundled document that a credential of `scheme` may call (its own security or
 * the document's), with a request path that fills each path parameter with `x0`.
 */
export function operationsAccepting(
  document: { paths: Record<string, Record<string, unknown>>; security?: unknown },
  scheme: string,
): Array<{ method: 'get' | 'post' | 'put' | 'patch' | 'delete'; path: string; operationId: string }> {
  const topLevel = (document.security ?? []) as Array<Record<string, string[]>>;
  return Object.entries(document.paths).flatMap(([template, item]) =>
    Object.entries(item as Record<string, SecuredOperation>)
      .filter(([method, operation]) => METHODS.includes(method) && (operation.security ?? topLevel).some((requirement) => scheme in requirement))
      .map(([method, operation]) => ({
        method: method as 'get' | 'post' | 'put' | 'patch' | 'delete',
        path: template.replace(/\{[^}]+\}/g, 'x0'),
        operationId: String(operation.operationId),
      })),
  );
}
