import { rawConnection } from '../helpers/raw-http';
import { ADMIN_SECRET, SERVICE_TOKEN, type TestGateway, startTestGateway } from '../helpers/test-gateway';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Every response in `text` (heads and Content-Length bodies, one after the other). */
function responsesIn(text: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length'] ?? 0);
    responses.push({ status: Number(statusLine?.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return responses;
}

/**
 * Malformed bodies and framings, each sent on a connection of its own as raw bytes; `Connection: close`
 * so the gateway closes once it has answered whatever it read. Bytes are latin1: `\xff` is one byte.
 */
const VARIANTS: Array<[string, (head: string) => string]> = [
  ['truncated JSON', (head) => `${head}Content-Type: application/json\r\nContent-Length: 9\r\n\r\n{"name":"`],
  ['invalid UTF-8', (head) => `${head}Content-Type: application/json\r\nContent-Length: 13\r\n\r\n{"name":"\xff\xfe"}`],
  ['a wrong content type', (head) => `${head}Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}`],
  ['chunked, malformed JSON', (head) => `${head}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n0\r\n\r\n`],
  ['chunked, a chunk size that is no number', (head) => `${head}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{"a\r\n0\r\n\r\n`],
  [
    'chunked, chunk extensions too large',
    (head) => `${head}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3;${'x'.repeat(20_000)}\r\n{"a\r\n0\r\n\r\n`,
  ],
  [
    'Content-Length and Transfer-Encoding together',
    (head) => `${head}Content-Type: application/json\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n0\r\n\r\n`,
  ],
  ['a malformed header line', (head) => `${head}Content-Type: application/json\r\nBad Header: 1\r\nContent-Length: 2\r\n\r\n{}`],
  [
    'more bytes than the Content-Length (the rest read as the next request)',
    (head) => `${head}Content-Type: application/json\r\nContent-Length: 5\r\n\r\n{"a":"\xff"}`,
  ],
  ['a body cut short by the client', (head) => `${head}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":`],
];

describe('every answer carries X-Request-Id and the envelope, also for requests Node cannot parse', () => {
  let t: TestGateway;
  /** [operation, listener URL, request head up to its body headers], with working credentials. */
  let operations: Array<[string, string, string]> = [];
  beforeAll(async () => {
    t = await startTestGateway();
    const start = (path: string, credentials: Record<string, string>) =>
      `POST ${path} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${Object.entries(credentials)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('')}`;
    operations = [
      ['admin POST /admin/keys', t.gateway.url, start('/admin/keys', { Authorization: `Bearer ${ADMIN_SECRET}` })],
      ['client POST /images/generate', t.gateway.url, start('/images/generate', { Authorization: `Bearer ${(await t.createKey()).key}` })],
      ['internal POST /api/v1/creative/images/generations', t.gateway.internalUrl, start('/api/v1/creative/images/generations', SERVICE_TOKEN)],
    ];
  });
  afterAll(() => t.close());

  it.each(VARIANTS)('%s: a 4xx in the envelope whose request_id is its X-Request-Id, on admin, client and internal operations', async (_variant, build) => {
    for (const [operation, url, head] of operations) {
      const bytes = build(head);
      const connection = await rawConnection(url, '');
      connection.socket.write(Buffer.from(bytes, 'latin1'));
      if (bytes.endsWith('{"name":')) connection.socket.end();
      expect([operation, await connection.closedByServer()]).toEqual([operation, true]);
      const responses = responsesIn(connection.received());
      expect([operation, responses.length > 0, connection.received().length > 0]).toEqual([operation, true, true]);
      for (const res of responses) {
        const requestId = res.headers['x-request-id'];
        expect([operation, res.status >= 400 && res.status < 500, requestId]).toEqual([operation, true, expect.stringMatching(/^[\w.:-]{1,128}$/)]);
        expect([operation, JSON.parse(res.body).error]).toEqual([operation, expect.objectContaining({ code: expect.any(String), request_id: requestId })]);
        expect(res.headers['x-content-type-options']).toBe('nosniff');
      }
    }
  });
});
