import type { IncomingMessage, ServerResponse } from 'node:http';

/** Whether the request declared a body: a Content-Length above 0, or a chunked one. */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * An error answer sent before the request's body has arrived (401, 413, 408, ...) closes the
 * connection: otherwise Node keeps the socket to read the rest of the body, and a client trickling
 * it holds the socket. Called where error answers are written (sendError; handlers answer only
 * successes), not by wrapping each response's writeHead: a closure stored on every response kept
 * requests alive through V8's young collections (docs/benchmarks-history.md, "Promoted requests").
 */
export function closeIfBodyUnread(res: ServerResponse): void {
  if (!res.headersSent && !res.req.complete && hasBody(res.req)) res.setHeader('Connection', 'close');
}
