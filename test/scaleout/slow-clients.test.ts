import { until } from '../helpers/until';
import net from 'node:net';
import { type GatewayProcess, MAIN_JS, startGatewayProcess } from '../helpers/gateway-process';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ADMIN_SECRET } from '../helpers/test-gateway';

const OPEN_FILES = 200;
const ATTACK_SOCKETS = 300;

/**
 * One client holding more sockets than the process has file descriptors, each announcing a body and
 * sending a byte of it now and then, and reconnecting whenever the gateway closes one.
 */
function slowBodyAttack(url: string, sockets: number, key: string) {
  const { hostname, port } = new URL(url);
  const open = new Set<net.Socket>();
  let closedByGateway = 0;
  let stopped = false;
  const connect = () => {
    if (stopped) return;
    const socket = net.connect(Number(port), hostname);
    open.add(socket);
    let trickle: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      // With a valid key: the gateway waits for the body (a refused request would be answered and closed at once).
      socket.write(
        `POST /images/generate HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
      );
      trickle = setInterval(() => socket.write(' '), 200);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(trickle);
      open.delete(socket);
      if (stopped) return;
      closedByGateway += 1;
      setTimeout(connect, 20);
    });
  };
  for (let i = 0; i < sockets; i += 1) connect();
  return {
    closedByGateway: () => closedByGateway,
    stop() {
      stopped = true;
      for (const socket of open) socket.destroy();
    },
  };
}

describe('a slow-body attack on a process with few file descriptors', () => {
  let database: ThrowawayDatabase;
  let gateway: GatewayProcess;
  let attackerKey: string;
  beforeAll(async () => {
    database = await createThrowawayDatabase('sqlite');
    gateway = await startGatewayProcess(
      { DATABASE_URL: database.url, BODY_TIMEOUT_MS: '1000' },
      { command: ['bash', '-c', `ulimit -n ${OPEN_FILES} && exec "$0" "$1"`, process.execPath, MAIN_JS] },
    );
    const created = await fetch(`${gateway.url}/admin/keys`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ADMIN_SECRET}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'attacker', owner: 'attacker@example.com', credits_quota: 1, quota_period_days: 1, allowed_providers: ['local'] }),
    });
    attackerKey = ((await created.json()) as { key: string }).key;
  });
  afterAll(async () => {
    await gateway?.stop();
    await database.drop();
  });

  it('new clients and /healthz keep being answered while it runs, and the attacking sockets are cut', async () => {
    const attack = slowBodyAttack(gateway.url, ATTACK_SOCKETS, attackerKey);
    try {
      // Let the attack reach the descriptor limit: more sockets were opened than the process can hold.
      const started = Date.now();
      while (attack.closedByGateway() < ATTACK_SOCKETS - OPEN_FILES && Date.now() - started < 20_000) await new Promise((r) => setTimeout(r, 50));
      // At the cap a new connection is either admitted by displacing another or refused: in a flood of
      // connections as new as itself, a new client can be the one refused (reset). What holds is that a
      // client retrying a reset connection, as a load balancer's health check does, always gets through.
      let retries = 0;
      const answered = async (request: () => Promise<Response>): Promise<Response> => {
        for (let attempt = 1; ; attempt += 1) {
          try {
            return await request();
          } catch (error) {
            if (attempt === 3) throw error;
            retries += 1;
          }
        }
      };
      const close = { Connection: 'close' };
      for (let i = 0; i < 10; i += 1) {
        // A new connection each time (no keep-alive), as a new client would open.
        const health = await answered(() => fetch(`${gateway.url}/healthz`, { headers: close, signal: AbortSignal.timeout(10_000) }));
        expect(health.status).toBe(200);
        const internal = await answered(() => fetch(`${gateway.internalUrl}/healthz`, { headers: close, signal: AbortSignal.timeout(10_000) }));
        expect(internal.status).toBe(200);
        const created = await answered(() =>
          fetch(`${gateway.url}/admin/keys`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${ADMIN_SECRET}`, 'Content-Type': 'application/json', ...close },
            body: JSON.stringify({ name: `during attack ${i}`, owner: 'ops@example.com', credits_quota: 1, quota_period_days: 1 }),
            signal: AbortSignal.timeout(10_000),
          }),
        );
        expect(created.status).toBe(201);
      }
      // Stalled bodies are displaced before new clients, so retries are rare; they are counted, not hidden.
      if (retries > 0) console.log(`[slow-body attack] ${retries} of 30 requests needed a second connection`);
      expect(retries).toBeLessThan(15);
      // The attack's sockets do not stay: the gateway keeps closing them (cap, body deadline), not the
      // attacker, which reconnects each one it loses. Bounded wait: on a loaded machine the cuts come slower.
      await until(() => attack.closedByGateway() > ATTACK_SOCKETS, 'the gateway to cut more sockets than the attack holds', 40_000);
      expect(attack.closedByGateway()).toBeGreaterThan(ATTACK_SOCKETS);
    } finally {
      attack.stop();
    }
    expect(gateway.output.join('')).toContain('connection limit reached');
  }, 120_000);
});
