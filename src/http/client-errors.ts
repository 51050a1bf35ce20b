import { STATUS_CODES, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Response } from 'express';
import type { Logger } from 'pino';
import { ApiError } from '../errors/api-error';
import { errorEnvelope, sendError } from '../errors/error-handler';
import { newId } from '../shared/ids';
import { SECURITY_HEADERS } from './security-headers';

/** An error of Node's HTTP parser (llhttp's `HPE_*` codes, with its `reason`) or of the socket under it. */
interface ClientError extends Error {
  code?: string;
  reason?: string;
}

/** What a request Node could not parse is refused with. */
function refusalOf(error: ClientError): ApiError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError('request_timeout', 'The request did not arrive in time.');
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('invalid_request', 'The request headers are larger than the server takes.');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ApiError('payload_too_large', 'The chunk extensions of the request body are too large.');
    default:
      return new ApiError('invalid_request', `The request is not well-formed HTTP/1.1${error.reason ? ` (${error.reason})` : ''}.`);
  }
}

/**
 * Requests Node's HTTP parser refuses (a malformed header or chunk, Content-Length with
 * Transfer-Encoding, headers too large or too slow) never reach the app: Node's own answer is a bare
 * `400 Bad Request` without the envelope or an `X-Request-Id`, written over whatever response was
 * pending on the connection. Here they get the envelope like every other answer, and the connection
 * closes (nothing after a parse error can be framed):
 * - an error in the body of the request being answered is that request's answer, with its request id;
 * - an error after a request whose body was complete (the next, pipelined one) is answered once that
 *   request's own answer has gone out;
 * - otherwise (no request yet) it is answered at once, with a new request id.
 */
export function answerClientErrors(server: Server, logger: Logger): void {
  // The parser reports an error again for every later chunk of the same connection.
  const answered = new WeakSet<Socket>();
  server.on('clientError', (error: ClientError, socket: Socket) => {
    if (answered.has(socket)) return;
    answered.add(socket);
    if (!socket.writable || error.code === 'ECONNRESET' || error.code === 'EPIPE') {
      socket.destroy();
      return;
    }
    const refusal = refusalOf(error);
    // The response Node itself consults in its default handler: the one currently written on this socket.
    const pending = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
    if (pending && !pending.req.complete) {
      if (pending.headersSent) {
        socket.destroy();
        return;
      }
      pending.setHeader('Connection', 'close');
      sendError(pending as Response, refusal);
      return;
    }
    const answer = () => writeRawError(socket, refusal, logger, error.code);
    if (pending && !pending.writableFinished) {
      pending.once('finish', answer);
      pending.once('close', () => socket.destroy());
    } else answer();
  });
}

function writeRawError(socket: Socket, refusal: ApiError, logger: Logger, cause: string | undefined): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = newId('req');
  const body = JSON.stringify(errorEnvelope(refusal, requestId));
  const headers = [
    ['Content-Type', 'application/json; charset=utf-8'],
    ['Content-Length', String(Buffer.byteLength(body))],
    ['X-Request-Id', requestId],
    ...SECURITY_HEADERS,
    ['Connection', 'close'],
  ];
  const head = [`HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}`, ...headers.map(([name, value]) => `${name}: ${value}`)].join('\r\n');
  socket.end(`${head}\r\n\r\n${body}`);
  socket.once('finish', () => socket.destroy());
  logger.info({ request_id: requestId, status: refusal.status, cause }, 'request not well-formed HTTP');
}
