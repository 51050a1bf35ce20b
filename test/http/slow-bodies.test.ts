import { rawConnection } from '../helpers/raw-http';
import { connectionsCheckingIntervalMs } from '../../src/http/listeners';
import { ADMIN_SECRET, SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';

/** Request head for a JSON POST that announces `length` bytes of body. */
function postHead(path: string, length: number, headers: Record<string, string> = {}): string {
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
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
    ['an unauthenticated client', '/v1/images/generations', {}, 65_536],
    ['the admin', '/admin/keys', admin, 65_536],
    // Operations that take image inputs (x-image-inputs) have the larger limit of GATEWAY_INPUT_LIMITS.maxBodyBytes.
    ['an unauthenticated client of an operation with image inputs', '/images/generate', {}, 75_497_472],
    ['an unauthenticated client of OpenAI edits', '/v1/images/edits', {}, 75_497_472],
  ])('a Content-Length over the body limit from %s is 413 before any body byte is sent, and the connection closes', async (_who, path, headers, limit) => {
    const connection = await rawConnection(t.gateway.url, postHead(path, limit + 1, headers));
    const res = await connection.response();
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({
      error: { code: 'payload_too_large', message: expect.stringContaining(String(limit)), type: 'invalid_request_error', param: null, request_id: res.headers['x-request-id'] },
    });
    expect(res.headers.connection).toBe('close');
    expect(await connection.closedByServer()).toBe(true);
  });

  it('a request refused before its body arrived (401) closes its connection instead of waiting for the body', async () => {
    const connection = await rawConnection(t.gateway.url, `${postHead('/images/generate', 1000)}{`);
    const res = await connection.response();
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe('close');
    expect(await connection.closedByServer()).toBe(true);
  });

  it.each([
    ['public', '/admin/keys', admin],
    ['internal', '/api/v1/creative/images/generations', SERVICE_TOKEN],
  ])('a body still trickling in after BODY_TIMEOUT_MS is 408 request_timeout on the %s listener, and the connection closes', async (listener, path, headers) => {
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
  });

  it('a client key\'s body trickling in past BODY_TIMEOUT_MS on a rate-limited operation is 408 as it is: no rate-limit headers, the connection closes', async () => {
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

  it.each(['public', 'internal'])('headers still trickling in after HEADERS_TIMEOUT_MS close the connection on the %s listener, within 10%% of it', async (listener) => {
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
  });
});
