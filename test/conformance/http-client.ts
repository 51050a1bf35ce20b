import http from 'node:http';
import type { CheckedResponse } from './response-checker';

// A new connection per request: a reused idle socket may meet the server's keep-alive timeout.
const agent = new http.Agent({ keepAlive: false });

/**
 * One raw HTTP exchange: the path goes out exactly as given (odd encodings included), any method,
 * any body with any content type.
 */
export function exchange(
  baseUrl: string,
  request: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<CheckedResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: request.method,
        path: request.path,
        // Node frames a DELETE/OPTIONS body only with an explicit length (as every real client sends).
        headers: request.body === undefined ? request.headers : { ...request.headers, 'Content-Length': String(Buffer.byteLength(request.body)) },
        agent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            method: request.method,
            path: request.path.split('?')[0]!,
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (request.body !== undefined) req.end(request.body);
    else req.end();
  });
}

export function closeClient(): void {
  agent.destroy();
}
