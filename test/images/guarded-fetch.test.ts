import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { GuardedFetchError, getGuarded } from '../../src/shared/outbound';
import { selfSigned } from '../helpers/self-signed-tls';
import { testPng } from '../helpers/test-images';

/**
 * The guarded GET image inputs are fetched with (src/shared/safe-url.ts), against a local https
 * server: only with allowPrivate (the server is on loopback), so each bound is seen on its own.
 */
describe('getGuarded: the https download of image inputs', () => {
  const tls = selfSigned();
  let server: https.Server;
  let base: string;
  const image = testPng(32, 32);
  beforeAll(async () => {
    server = https.createServer(tls, (req, res) => {
      const url = req.url ?? '/';
      if (url === '/image.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(image);
      if (url === '/declared-large') return void res.writeHead(200, { 'content-length': String(5_000_000) }).end();
      if (url === '/streamed-large') {
        res.writeHead(200, { 'content-type': 'image/png' });
        const chunk = Buffer.alloc(64 * 1024);
        let sent = 0;
        const push = () => {
          while (sent < 5_000_000) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', push);
          }
          res.end();
        };
        return push();
      }
      if (url === '/to-image') return void res.writeHead(302, { location: '/image.png' }).end();
      if (url === '/to-http') return void res.writeHead(302, { location: `http://127.0.0.1:${(server.address() as AddressInfo).port}/image.png` }).end();
      if (url.startsWith('/loop')) return void res.writeHead(302, { location: `/loop${url.length}` }).end();
      if (url === '/silent') return; // never answers
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const get = (route: string, options: Partial<Parameters<typeof getGuarded>[1]> = {}) =>
    getGuarded(`${base}${route}`, { maxBytes: 1_000_000, timeoutMs: 2000, allowPrivate: true, ca: tls.cert, ...options });
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: unknown) => error as GuardedFetchError,
    );

  it('downloads the bytes, following a redirect on the same terms', async () => {
    expect((await get('/image.png')).equals(image)).toBe(true);
    expect((await get('/to-image')).equals(image)).toBe(true);
  });

  it('refuses the loopback server itself unless private addresses are allowed', async () => {
    expect(await refusal(get('/image.png', { allowPrivate: false }))).toMatchObject({
      kind: 'unreachable',
      message: expect.stringContaining('loopback, private'),
    });
  });

  it('cuts a body at the byte limit: declared or counted while it streams', async () => {
    expect(await refusal(get('/declared-large'))).toMatchObject({ kind: 'too_large' });
    expect(await refusal(get('/streamed-large'))).toMatchObject({ kind: 'too_large' });
  });

  // Each hop is checked as the first one is (scheme, literal address, the DNS-time guard).
  it('redirects: never to http, at most 3', async () => {
    expect(await refusal(get('/to-http'))).toMatchObject({ kind: 'unreachable', message: expect.stringContaining('not an https URL') });
    expect(await refusal(get('/loop'))).toMatchObject({ kind: 'unreachable', message: expect.stringContaining('more than 3') });
  });

  it('an error status, a silent server (within the deadline), an untrusted certificate: unreachable', async () => {
    expect(await refusal(get('/missing'))).toMatchObject({ kind: 'unreachable', message: expect.stringContaining('HTTP 404') });
    const started = Date.now();
    expect(await refusal(get('/silent', { timeoutMs: 300 }))).toMatchObject({ kind: 'unreachable', message: expect.stringContaining('did not answer within') });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await refusal(getGuarded(`${base}/image.png`, { maxBytes: 1000, timeoutMs: 2000, allowPrivate: true }))).toMatchObject({ kind: 'unreachable' });
  });
});
