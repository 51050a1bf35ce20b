import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { creativeOperations } from '../../generated/creative.operations';
import { gatewayOperations } from '../../generated/gateway.operations';

/** Where a connection is: no request yet, request body still arriving, being answered, idle keep-alive. */
type Phase = 'waiting' | 'reading' | 'working' | 'idle';

interface Tracked {
  phase: Phase;
  request?: http.IncomingMessage;
}

/** Under this share of the cap nothing is reaped; above it, idle keep-alive connections are closed first. */
const PRESSURE_SHARE = 0.9;
const EVICTION_LOG_INTERVAL_MS = 10_000;
/** Health probes and metrics scrapes (both listeners), not counted as requests by `requestsStarted`. */
const PROBE_PATHS: ReadonlySet<string> = new Set(
  [
    gatewayOperations.getLiveness,
    gatewayOperations.getReadiness,
    creativeOperations.getInternalLiveness,
    creativeOperations.getInternalReadiness,
    creativeOperations.getMetrics,
  ].map((operation) => operation.path),
);

/**
 * Caps the open client connections of all listeners together below the process's file descriptor
 * limit, so the gateway can always accept (and answer) a new client: at the cap a new connection
 * displaces the idle keep-alive connection, then the connection whose body is still arriving,
 * then the connection without a request, that has waited longest. Connections whose request is
 * being answered are never closed; when only those remain, the new connection is refused.
 */
export class ConnectionGuard {
  // A Map iterates in insertion order: the first match of a phase is the oldest connection.
  private readonly connections = new Map<Socket, Tracked>();
  private evictedSinceLog = 0;
  private lastLogAt = 0;
  private requests = 0;

  constructor(
    private readonly maxConnections: number,
    private readonly logger: Logger,
  ) {}

  get open(): number {
    return this.connections.size;
  }

  /** Requests seen so far, on all listeners, less health probes and metrics scrapes. */
  get requestsStarted(): number {
    return this.requests;
  }

  /** True while any connection has a request being read or answered. */
  busy(): boolean {
    for (const tracked of this.connections.values()) if (tracked.phase === 'working' || tracked.phase === 'reading') return true;
    return false;
  }

  watch(server: http.Server): void {
    server.on('connection', (socket: Socket) => this.admit(socket));
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      // Probes and scrapes come every few seconds whatever the load: they do not make the gateway busy.
      if (!PROBE_PATHS.has(req.url ?? '')) this.requests += 1;
      const tracked = this.connections.get(req.socket);
      if (!tracked) return;
      tracked.phase = req.complete ? 'working' : 'reading';
      tracked.request = req;
      res.once('finish', () => {
        // The entry lets go of the request: a request still reachable from an entry that V8 has moved to the
        // old generation survives every young collection until the next full one, with all it references
        // (the listeners and base layers alone under load: 17% of all allocation promoted before, 0.5% after).
        tracked.request = undefined;
        tracked.phase = 'idle';
        // Re-inserted at the end: "idle" is counted from the last answer, not from the connect.
        if (!this.connections.delete(req.socket)) return;
        this.connections.set(req.socket, tracked);
      });
    });
  }

  private admit(socket: Socket): void {
    this.connections.set(socket, { phase: 'waiting' });
    socket.once('close', () => this.connections.delete(socket));
    if (this.connections.size <= this.maxConnections * PRESSURE_SHARE) return;
    this.closeAll('idle', socket);
    while (this.connections.size > this.maxConnections) {
      // Stalled bodies first: a new client is 'waiting' too until its headers are parsed, and under
      // a slow-body attack it must not be the one displaced by the attacker's reconnections.
      const victim = this.oldestStalledReader() ?? this.oldest('waiting', socket);
      this.evict(victim ?? socket);
      if (!victim) break;
    }
  }

  private closeAll(phase: Phase, except: Socket): void {
    for (const [socket, tracked] of this.connections) if (tracked.phase === phase && socket !== except) this.evict(socket);
  }

  private oldest(phase: Phase, except: Socket): Socket | undefined {
    for (const [socket, tracked] of this.connections) if (tracked.phase === phase && socket !== except) return socket;
    return undefined;
  }

  /** A connection still receiving its body (one whose body has arrived is being answered). */
  private oldestStalledReader(): Socket | undefined {
    for (const [socket, tracked] of this.connections) if (tracked.phase === 'reading' && tracked.request?.complete === false) return socket;
    return undefined;
  }

  private evict(socket: Socket): void {
    this.connections.delete(socket);
    socket.destroy();
    this.evictedSinceLog += 1;
    const now = Date.now();
    if (now - this.lastLogAt >= EVICTION_LOG_INTERVAL_MS) {
      this.logger.warn(
        { closed: this.evictedSinceLog, open: this.connections.size, max_connections: this.maxConnections },
        'connection limit reached: closed idle or stalled connections',
      );
      this.lastLogAt = now;
      this.evictedSinceLog = 0;
    }
  }
}
