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
