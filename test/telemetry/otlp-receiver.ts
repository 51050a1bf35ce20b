import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as OTLP/JSON encodes it (opentelemetry-proto's JSON mapping: ids in hex, times as strings). */
export interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
  links?: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number };
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: Record<string, unknown> }> };
    scopeSpans?: Array<{ spans?: ExportedSpan[] }>;
  }>;
}

/**
 * A collector's OTLP/HTTP traces endpoint, as small as the protocol allows: POST /v1/traces with an
 * `ExportTraceServiceRequest` in JSON, answered 200 `{}`. Keeps every body as received.
 */
export async function startOtlpReceiver(): Promise<{
  url: string;
  bodies: string[];
  headers: http.IncomingHttpHeaders[];
  spans(): ExportedSpan[];
  resources(): Array<Record<string, unknown>>;
  close(): Promise<void>;
}> {
  const bodies: string[] = [];
  const headers: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(404).end();
        return;
      }
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      headers.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const requests = () => bodies.map((body) => JSON.parse(body) as ExportRequest);
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    headers,
    spans: () => requests().flatMap((r) => (r.resourceSpans ?? []).flatMap((rs) => (rs.scopeSpans ?? []).flatMap((ss) => ss.spans ?? []))),
    resources: () =>
      requests().flatMap((r) =>
        (r.resourceSpans ?? []).map((rs) => Object.fromEntries((rs.resource?.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]))),
      ),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A span's attributes as plain values. */
export function attributesOf(span: ExportedSpan): Record<string, unknown> {
  return Object.fromEntries(
    (span.attributes ?? []).map(({ key, value }) => {
      const raw = Object.values(value)[0];
      // OTLP/JSON writes 64-bit integers as strings.
      return [key, 'intValue' in value ? Number(raw) : raw];
    }),
  );
}
