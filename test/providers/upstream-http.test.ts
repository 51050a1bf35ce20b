import http from 'node:http';
import net from 'node:net';
import { configureUpstreamHttp, post, UpstreamHttpError } from '../../src/providers/upstream-http';

/** What the hop says about a failed call: whether the upstream may have read the request (then no failover). */
describe('upstream hop: failures before and after the request was written', () => {
  const servers: net.Server[] = [];
  afterAll(async () => {
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
  });
  const listen = async (onConnection: (socket: net.Socket) => void) => {
    const server = net.createServer(onConnection);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new URL(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/images/generations`);
  };
  const failure = async (url: URL): Promise<UpstreamHttpError> => {
    const error = await post(url, '{"prompt":"x"}', {}, new AbortController().signal).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UpstreamHttpError);
    return error as UpstreamHttpError;
  };

  it('a reset after the upstream read the request: not "never sent" (it may have accepted it)', async () => {
    const url = await listen((socket) => socket.once('data', () => socket.resetAndDestroy()));
    const error = await failure(url);
    expect(error.code).toBe('ECONNRESET');
    expect(error.neverSent).toBe(false);
  });

  it('a refused connection: never sent', async () => {
    const url = await listen(() => undefined);
    await new Promise((resolve) => servers.pop()!.close(resolve));
    const error = await failure(url);
    expect(error.code).toBe('ECONNREFUSED');
    expect(error.neverSent).toBe(true);
  });

  it('an answer is read whole and handed over as one Buffer', async () => {
    const body = JSON.stringify({ data: [{ b64_json: 'x'.repeat(200_000) }] });
    const url = await listen((socket) =>
      socket.once('data', () =>
        socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nretry-after: 3\r\ncontent-length: ${body.length}\r\n\r\n${body}`),
      ),
    );
    const answer = await post(url, '{}', {}, new AbortController().signal);
    expect(answer.status).toBe(200);
    expect(answer.headers['retry-after']).toBe('3');
    expect(answer.body.toString()).toBe(body);
  });

  it('reads one header by its lower-case name, whatever case it was sent in, the first of repeated ones', async () => {
    const url = await listen((socket) =>
      socket.once('data', () => socket.end('HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nX-Twice: a\r\nx-twice: b\r\ncontent-length: 2\r\n\r\n{}')),
    );
    const answer = await post(url, '{}', {}, new AbortController().signal);
    expect(answer.header('retry-after')).toBe('7');
    expect(answer.header('x-twice')).toBe('a');
    expect(answer.header('x-absent')).toBeUndefined();
    // The same values once every header was decoded.
    expect(answer.headers['x-twice']).toEqual(['a', 'b']);
    expect(answer.header('x-twice')).toBe('a');
  });
  it('reports the moment the request was written, and only then: a call aborted before it connected was never sent', async () => {
    // Reads the request and never answers: the request is written, then the caller gives up.
    const held: net.Socket[] = [];
    const url = await listen((socket) => held.push(socket));
    const post1 = new AbortController();
    let written = false;
    const call = post(url, '{"prompt":"x"}', {}, post1.signal, false, () => {
      written = true;
    }).catch((e: unknown) => e);
    for (let i = 0; i < 200 && !written; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    post1.abort(new Error('client gone'));
    expect(await call).toEqual(new Error('client gone'));
    expect(written).toBe(true);

    // Aborted in the same tick it was made: the connection is not up yet, so nothing was written.
    const post2 = new AbortController();
    let writtenEarly = false;
    const early = post(url, '{"prompt":"x"}', {}, post2.signal, false, () => {
      writtenEarly = true;
    }).catch((e: unknown) => e);
    post2.abort(new Error('client gone'));
    expect(await early).toEqual(new Error('client gone'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(writtenEarly).toBe(false);
    for (const socket of held) socket.destroy();
  });
});

describe('upstream hop: idle connections', () => {
  afterAll(() => configureUpstreamHttp({ connectTimeoutMs: 3000, keepAliveMs: 10_000 }));

  /** An upstream answering keep-alive with a long Keep-Alive hint; counts the connections it accepted and when each closed. */
  const keepAliveUpstream = async () => {
    const closed: number[] = [];
    const accepted: number[] = [];
    const server = http.createServer({ keepAliveTimeout: 60_000 }, (_req, res) => {
      res.setHeader('keep-alive', 'timeout=60');
      res.end('{}');
    });
    server.on('connection', (socket) => {
      accepted.push(Date.now());
      socket.on('close', () => closed.push(Date.now()));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = new URL(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/images/generations`);
    return { url, accepted, closed, close: () => new Promise((resolve) => server.close(resolve)) };
  };

  it('an idle connection closes after UPSTREAM_KEEP_ALIVE_MS, even when the upstream would keep it for 60 s', async () => {
    configureUpstreamHttp({ connectTimeoutMs: 3000, keepAliveMs: 300 });
    const upstream = await keepAliveUpstream();
    expect((await post(upstream.url, '{}', {}, new AbortController().signal)).status).toBe(200);
    const answeredAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(upstream.closed).toHaveLength(1);
    expect(upstream.closed[0]! - answeredAt).toBeLessThan(1400);
    await upstream.close();
  });

  it('within it, the next call reuses the connection', async () => {
    configureUpstreamHttp({ connectTimeoutMs: 3000, keepAliveMs: 5000 });
    const upstream = await keepAliveUpstream();
    await post(upstream.url, '{}', {}, new AbortController().signal);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await post(upstream.url, '{}', {}, new AbortController().signal);
    expect([upstream.accepted.length, upstream.closed.length]).toEqual([1, 0]);
    configureUpstreamHttp({ connectTimeoutMs: 3000, keepAliveMs: 10_000 });
    await upstream.close();
  });
});
