import { rawConnection } from '../helpers/raw-http';
import { connectionsCheckingIntervalMs } from '../../src/http/listeners';
import { ADMIN_SECRET, SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { testPng } from '../helpers/test-images';
import { until } from '../helpers/until';

/** Request head for a JSON POST that announces `length` bytes of body. */
function postHead(path: string, length: number, headers: Record<string, string> = {}): string {
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `POST ${path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;
}

const admin = { Authorization: `Bearer ${ADMIN_SECRET}` };

describe('slow and oversized request bodies cannot hold connections', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ BODY_TIMEOUT_MS: '500' });
  });
  afterAll(() => t.close());

  it.each([
    ['an unauthenticated client', '/generations/gen_1/cancel', {}, 65_536],
    ['the admin', '/admin/keys', admin, 65_536],
    // The generation operations (x-image-inputs) have the larger limit of GATEWAY_INPUT_LIMITS.maxBodyBytes.
    ['an unauthenticated client of an operation with image inputs', '/images/generate', {}, 75_497_472],
    ['an unauthenticated client of OpenAI generations', '/v1/images/generations', {}, 75_497_472],
    ['an unauthenticated client of OpenAI edits', '/v1/images/edits', {}, 75_497_472],
  ])('a Content-Length over the body limit from %s is 413 before any body byte is sent, and the connection closes', async (_who, path, headers, limit) => {
    const connection = await rawConnection(t.gateway.url, postHead(path, limit + 1, headers));
    const res = await connection.response();
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({
      error: {
        code: 'payload_too_large',
        message: expect.stringContaining(String(limit)),
        type: 'invalid_request_error',
        param: null,
        request_id: res.headers['x-request-id'],
      },
    });
    expect(res.headers.connection).toBe('close');
    expect(await connection.closedByServer()).toBe(true);
  });

  it('a request refused before its body arrived (401) is answered at once; a body that then stops arriving is cut at BODY_TIMEOUT_MS', async () => {
    const connection = await rawConnection(t.gateway.url, `${postHead('/images/generate', 1000)}{`);
    const res = await connection.response();
    expect(res.status).toBe(401);
    expect(await connection.closedByServer()).toBe(true);
  });

  it.each([
    ['public', '/admin/keys', admin],
    ['internal', '/api/v1/creative/images/generations', SERVICE_TOKEN],
  ])(
    'a body still trickling in after BODY_TIMEOUT_MS is 408 request_timeout on the %s listener, and the connection closes',
    async (listener, path, headers) => {
      const url = listener === 'public' ? t.gateway.url : t.gateway.internalUrl;
      const connection = await rawConnection(url, `${postHead(path, 1000, headers)}{`);
      const trickle = setInterval(() => connection.socket.write(' '), 100);
      try {
        const res = await connection.response();
        expect(res.status).toBe(408);
        expect(JSON.parse(res.body).error).toMatchObject({ code: 'request_timeout', type: 'invalid_request_error', request_id: res.headers['x-request-id'] });
        expect(res.headers.connection).toBe('close');
        expect(await connection.closedByServer()).toBe(true);
      } finally {
        clearInterval(trickle);
      }
    },
  );

  it("a client key's body trickling in past BODY_TIMEOUT_MS on a rate-limited operation is 408 as it is: no rate-limit headers, the connection closes", async () => {
    const { key } = await t.createKey();
    const connection = await rawConnection(t.gateway.url, `${postHead('/images/generate', 1000, { Authorization: `Bearer ${key}` })}{`);
    const trickle = setInterval(() => connection.socket.write(' '), 100);
    try {
      const res = await connection.response();
      expect([res.status, JSON.parse(res.body).error.code]).toEqual([408, 'request_timeout']);
      expect(Object.keys(res.headers).filter((name) => name.toLowerCase().includes('ratelimit'))).toEqual([]);
      expect(res.headers.connection).toBe('close');
      expect(await connection.closedByServer()).toBe(true);
    } finally {
      clearInterval(trickle);
    }
  });

  it('a complete body keeps its keep-alive connection', async () => {
    const body = JSON.stringify({ name: 'kept', owner: 'o@example.com', credits_quota: 1, quota_period_days: 1 });
    const connection = await rawConnection(t.gateway.url, `${postHead('/admin/keys', Buffer.byteLength(body), admin)}${body}`);
    expect((await connection.response()).status).toBe(201);
    expect(await connection.closedByServer(1000)).toBe(false);
    connection.socket.destroy();
  });
});

describe('a client that writes its whole body before it reads gets an early refusal, not a reset', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const boundary = 'cgw-whole-body';
  /** A multipart edit of `files` PNGs of `bytes` each: 24 MiB in all, far more than the socket buffers between client and gateway hold. */
  const edit = (files: number, bytes: number) =>
    Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx\r\n--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nlocal-1\r\n`,
      ),
      ...Array.from({ length: files }, (_, i) => {
        const png = testPng(4, 4, { shade: i });
        const head = `--${boundary}\r\nContent-Disposition: form-data; name="image[]"; filename="${i}.png"\r\nContent-Type: image/png\r\n\r\n`;
        return Buffer.concat([Buffer.from(head), png, Buffer.alloc(bytes - png.length), Buffer.from('\r\n')]);
      }),
      Buffer.from(`--${boundary}--\r\n`),
    ]);
  /** Writes the head and the whole body, then reads: the write's error (a reset) if any, then the answer. */
  async function writeThenRead(headers: Record<string, string>, body: Buffer) {
    const head = postHead('/v1/images/edits', body.length, { ...headers }).replace('application/json', `multipart/form-data; boundary=${boundary}`);
    const connection = await rawConnection(t.gateway.url, head);
    const written = await new Promise<Error | null | undefined>((resolve) => connection.socket.write(body, resolve));
    return { connection, written, res: await connection.response() };
  }

  it.each([
    ['401 for a missing key', {}, 24, 401, 'missing_api_key'],
    ['400 at the file limit (the 17th of 40 files)', 'key', 40, 400, 'invalid_request'],
  ] as const)(
    '%s: the rest of the body is read and dropped, the envelope arrives, and the connection serves the next request',
    async (_what, auth, files, status, code) => {
      const headers: Record<string, string> = auth === 'key' ? { Authorization: `Bearer ${(await t.createKey()).key}` } : {};
      const { connection, written, res } = await writeThenRead(headers, edit(files, Math.floor((24 * 1024 * 1024) / files)));
      expect(written ?? null).toBeNull();
      expect([res.status, JSON.parse(res.body).error.code, JSON.parse(res.body).error.request_id]).toEqual([status, code, res.headers['x-request-id']]);
      connection.socket.write('GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n');
      await until(() => connection.received().split('HTTP/1.1 ').length === 3, 'the answer to the next request on the connection');
      expect(connection.received().split('HTTP/1.1 ')[2]).toMatch(/^200 /);
      connection.socket.destroy();
    },
  );
});

describe('at the connection cap (MAX_CONNECTIONS), idle and stalled connections make room for new clients', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ MAX_CONNECTIONS: '16' });
  });
  afterAll(() => t.close());

  const healthz = 'GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n';

  it('closes idle keep-alive connections first, then the oldest connection without a request; a new client is answered', async () => {
    // Oldest: 4 connections that never send a request.
    const silent = await Promise.all(Array.from({ length: 4 }, () => rawConnection(t.gateway.url, '')));
    // Then 9 keep-alive connections, answered and now idle.
    const idle = await Promise.all(Array.from({ length: 9 }, () => rawConnection(t.gateway.url, healthz)));
    for (const connection of idle) expect((await connection.response()).status).toBe(200);
    expect(await idle[0]!.closedByServer(200)).toBe(false);

    // Past 90% of the cap: the idle ones go, the silent ones (not idle) stay.
    const pressure = await Promise.all(Array.from({ length: 2 }, () => rawConnection(t.gateway.url, healthz)));
    for (const connection of pressure) expect((await connection.response()).status).toBe(200);
    // Well within keepAliveTimeout (5 s) and headersTimeout (15 s): closed by the cap, not by a timeout.
    for (const connection of idle) expect(await connection.closedByServer(2000)).toBe(true);
    for (const connection of silent) expect(await connection.closedByServer(200)).toBe(false);

    // Fill the cap (4 + 12 = 16) with more silent connections (the 2 pressure ones, now idle, are
    // closed on the way); the next connection then displaces the oldest silent one.
    const more = await Promise.all(Array.from({ length: 12 }, () => rawConnection(t.gateway.url, '')));
    const newcomer = await rawConnection(t.gateway.url, healthz);
    expect((await newcomer.response()).status).toBe(200);
    expect(await silent[0]!.closedByServer(2000)).toBe(true);
    expect(await more[more.length - 1]!.closedByServer(200)).toBe(false);
    for (const connection of [...silent, ...more, ...pressure, newcomer]) connection.socket.destroy();
  });
});

describe('slow request headers cannot hold connections (issue #29 §8)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ HEADERS_TIMEOUT_MS: '1000' });
  });
  afterAll(() => t.close());

  it('the default 15 s headers timeout is checked at least every second (Node checks every 30 s unless told)', () => {
    expect(connectionsCheckingIntervalMs(15_000)).toBe(1_000);
    expect(connectionsCheckingIntervalMs(1_000)).toBe(100);
  });

  it.each(['public', 'internal'])(
    'headers still trickling in after HEADERS_TIMEOUT_MS close the connection on the %s listener, within 10%% of it',
    async (listener) => {
      const url = listener === 'public' ? t.gateway.url : t.gateway.internalUrl;
      const started = Date.now();
      const connection = await rawConnection(url, 'GET /healthz HTTP/1.1\r\nHost: gateway\r\n');
      let n = 0;
      const trickle = setInterval(() => connection.socket.write(`X-Slow-${(n += 1)}: a\r\n`), 100);
      try {
        expect(await connection.closedByServer(3_000)).toBe(true);
        const elapsed = Date.now() - started;
        expect(elapsed).toBeGreaterThanOrEqual(900);
        // Timeout plus one checking interval (100 ms), with slack for a loaded machine.
        expect(elapsed).toBeLessThan(1_800);
      } finally {
        clearInterval(trickle);
      }
    },
  );
});
