import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { answerClientErrors } from './client-errors';
import { ConnectionGuard } from './connection-guard';

/** Pending connections the kernel may queue per listener (docs/operators/production.md: net.core.somaxconn). */
const LISTEN_BACKLOG = 4096;

interface Listener {
  server: http.Server;
  port: number;
  draining: { value: boolean };
}

/**
 * How often Node looks for connections past headersTimeout/requestTimeout. Its default (30 s) let
 * slow headers hold a connection 30 s, not the 15 s documented: check a tenth as often as the
 * timeout, at least once a second, so a connection is closed within 10% of it.
 */
export function connectionsCheckingIntervalMs(headersTimeoutMs: number): number {
  return Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 10)));
}

async function listen(
  app: http.RequestListener,
  port: number,
  host: string,
  timeouts: { headersMs: number; requestMs: number },
  guard: ConnectionGuard,
  logger: Logger,
): Promise<Listener> {
  const server = http.createServer({ connectionsCheckingInterval: connectionsCheckingIntervalMs(timeouts.headersMs) }, app);
  guard.watch(server);
  answerClientErrors(server, logger);
  server.headersTimeout = timeouts.headersMs;
  server.requestTimeout = timeouts.requestMs;
  server.keepAliveTimeout = 5_000;
  const draining = { value: false };
  // While draining, answers close their connection so clients move to another replica.
  server.on('request', (_req, res: http.ServerResponse) => {
    if (draining.value) res.setHeader('Connection', 'close');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Node's default backlog (511) overflows when thousands of clients connect at once, and the kernel then
    // drops handshakes (retried by clients after 1, 3, 7 s...). The kernel caps it at net.core.somaxconn.
    server.listen({ port, host, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port, draining };
}

/** Graceful: stop accepting, let in-flight requests finish up to the deadline, then cut the rest. */
async function drain(listener: Listener, deadlineMs: number): Promise<void> {
  listener.draining.value = true;
  const closed = new Promise<void>((resolve) => listener.server.close(() => resolve()));
  listener.server.closeIdleConnections();
  const deadline = setTimeout(() => listener.server.closeAllConnections(), deadlineMs);
  await closed;
  clearTimeout(deadline);
}

export interface ListenerSettings {
  host: string;
  port: number;
  internalPort: number;
  maxConnections: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** How long a drain lets in-flight requests finish before their connections are cut. */
  shutdownTimeoutMs: number;
}

export interface Listeners {
  publicPort: number;
  internalPort: number;
  /** The one connection cap of both listeners (its counts tell idle compaction when the gateway is quiet). */
  connections: ConnectionGuard;
  /** Drains both listeners together. */
  close(): Promise<void>;
}

/** The public and internal listeners, under one connection cap: they share the process's file descriptors. */
export async function startListeners(
  apps: { public: http.RequestListener; internal: http.RequestListener },
  settings: ListenerSettings,
  logger: Logger,
): Promise<Listeners> {
  const connections = new ConnectionGuard(settings.maxConnections, logger);
  const timeouts = { headersMs: settings.headersTimeoutMs, requestMs: settings.requestTimeoutMs };
  const publicListener = await listen(apps.public, settings.port, settings.host, timeouts, connections, logger);
  const internalListener = await listen(apps.internal, settings.internalPort, settings.host, timeouts, connections, logger).catch(async (error: unknown) => {
    await drain(publicListener, 0);
    throw error;
  });
  return {
    publicPort: publicListener.port,
    internalPort: internalListener.port,
    connections,
    close: async () => {
      await Promise.all([drain(publicListener, settings.shutdownTimeoutMs), drain(internalListener, settings.shutdownTimeoutMs)]);
    },
  };
}
