import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AccessKeySet, KeysUnavailable } from '../../src/auth/access-jwt-auth';

/** A JWKS endpoint that streams `total` bytes of padding (no Content-Length unless `declare`), counting what it got out. */
async function startBloatedJwks(
  total: number,
  declare: boolean,
): Promise<{ url: string; written: () => number; closed: Promise<void>; close(): Promise<void> }> {
  let written = 0;
  let markClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    markClosed = resolve;
  });
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', ...(declare ? { 'content-length': String(total) } : {}) });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const pump = () => {
      while (written < total && !res.destroyed) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!res.destroyed) res.end();
    };
    res.on('close', markClosed);
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/certs`,
    written: () => written,
    closed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('AccessKeySet: the JWKS body is bounded (issue #29 §8)', () => {
  const clock = { now: () => Date.now() };
  const options = { maxAgeMs: 60_000, refetchCooldownMs: 0, timeoutMs: 10_000, maxBytes: 1024 * 1024 };

  it.each([
    ['streamed without Content-Length', false],
    ['declared by Content-Length', true],
  ])('a 100 MB JWKS %s is refused after at most about the limit, and the download is cut off', async (_name, declare) => {
    const jwks = await startBloatedJwks(100 * 1024 * 1024, declare);
    try {
      const keySet = new AccessKeySet(jwks.url, clock, undefined, options);
      await expect(keySet.keyFor({ alg: 'RS256', kid: 'k' }, { payload: '', signature: '' } as never)).rejects.toBeInstanceOf(KeysUnavailable);
      await jwks.closed;
      // The limit plus what socket buffers held when the reader cancelled; far from the 100 MB offered.
      expect(jwks.written()).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await jwks.close();
    }
  });
});
