import net from 'node:net';

/** A hand-driven HTTP/1.1 connection: the test decides which bytes go out, and when. */
export interface RawConnection {
  socket: net.Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves with the first complete response (head and Content-Length body), or rejects after `withinMs`. */
  response(withinMs?: number): Promise<{ status: number; headers: Record<string, string>; body: string }>;
  /** Resolves true when the server closes the connection within `withinMs`, false otherwise. */
  closedByServer(withinMs?: number): Promise<boolean>;
}

export function rawConnection(url: string, firstBytes: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(firstBytes);
      resolve(connection);
    });
    let text = '';
    let closed = false;
    const waiters = new Set<() => void>();
    const poke = () => {
      for (const waiter of waiters) waiter();
    };
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      poke();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      poke();
    });
    socket.once('error', reject);
    function until<T>(check: () => T | undefined, withinMs: number, onTimeout: () => T | Error): Promise<T> {
      return new Promise((done, fail) => {
        const attempt = () => {
          const value = check();
          if (value === undefined) return;
          clearTimeout(timer);
          waiters.delete(attempt);
          done(value);
        };
        const timer = setTimeout(() => {
          waiters.delete(attempt);
          const value = onTimeout();
          if (value instanceof Error) fail(value);
          else done(value);
        }, withinMs);
        waiters.add(attempt);
        attempt();
      });
    }
    const parse = () => {
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return undefined;
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      const length = Number(headers['content-length'] ?? 0);
      const body = text.slice(end + 4);
      if (body.length < length) return undefined;
      return { status: Number(statusLine?.split(' ')[1]), headers, body: body.slice(0, length) };
    };
    const connection: RawConnection = {
      socket,
      received: () => text,
      response: (withinMs = 10_000) => until(parse, withinMs, () => new Error(`no complete response within ${withinMs} ms; received: ${JSON.stringify(text)}`)),
      closedByServer: (withinMs = 10_000) =>
        until(
          () => (closed ? true : undefined),
          withinMs,
          () => false,
        ),
    };
  });
}
