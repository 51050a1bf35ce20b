import type { IncomingMessage, ServerResponse } from 'node:http';

/** Whether the request declared a body: a Content-Length above 0, or a chunked one. */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * An error answer sent before the request's body has fully arrived (401, 400 at the file limit, ...).
 * Closing the connection at once would reset it under a client still writing the body, and clients
 * that write the whole body before they read (the OpenAI SDKs on Node 20 and 22, most HTTP libraries)
 * would see a connection error instead of the answer. So the rest of the body is read and dropped,
 * at most `res.locals.bodyLimitBytes` more bytes (the request's body limit; a chunked body past it
 * has its connection closed) and only until the body deadline (body-deadline.ts), and the connection
 * stays usable. `closeAtOnce` (a body over the limit, one past its deadline) closes instead: reading
 * it is what the answer refuses.
 *
 * Called where error answers are written (sendError; handlers answer only successes), not by
 * wrapping each response's writeHead: a closure stored on every response kept requests alive
 * through V8's young collections (docs/benchmarks-history.md, "Promoted requests").
 */
export function settleUnreadBody(res: ServerResponse, closeAtOnce: boolean): void {
  const req = res.req;
  if (res.headersSent || req.complete || !hasBody(req)) return;
  const limitBytes = (res as { locals?: { bodyLimitBytes?: number } }).locals?.bodyLimitBytes;
  if (closeAtOnce || limitBytes === undefined) {
    res.setHeader('Connection', 'close');
    return;
  }
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > limitBytes) req.socket.destroy();
  });
  req.resume();
}
