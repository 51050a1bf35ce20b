import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { groupAlive, killGroup, portClosed } from '../helpers/process-tree';
import { until } from '../helpers/until';
import { rawConnection } from '../helpers/raw-http';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { ADMIN_SECRET } from '../helpers/test-gateway';

/**
 * `npm start` as the README's quick start and a process manager (docs/operators/production.md) run it: npm, the shell npm starts, node. The
 * signal goes to npm's pid only, as systemd (KillMode=mixed) or a container runtime would send it.
 */
describe('npm start as a real process tree', () => {
  let database: ThrowawayDatabase;
  let gateway: GatewayProcess | undefined;
  beforeAll(async () => {
    database = await createThrowawayDatabase('sqlite');
  });
  afterEach(() => killGroup(gateway?.child.pid));
  afterAll(() => database.drop());

  const npmStart = (env: Record<string, string> = {}) =>
    startGatewayProcess({ DATABASE_URL: database.url, HOME: process.env.HOME ?? '/tmp', ...env }, { command: ['npm', 'start'], detached: true });

  it.each(['SIGTERM', 'SIGINT'] as const)('%s to the npm process drains the gateway and leaves nothing running', async (signal) => {
    gateway = await npmStart();
    const npmPid = gateway.child.pid as number;
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    process.kill(npmPid, signal);
    await until(() => portClosed(gateway!.url), 'public port closed', 15_000);
    await until(() => portClosed(gateway!.internalUrl), 'internal port closed', 15_000);
    await until(() => !groupAlive(npmPid), 'every process of npm start gone', 15_000);
    expect(gateway.output.join('')).toContain(`"signal":"${signal}"`);
  });

  it('a second SIGINT exits at once instead of waiting for in-flight requests', async () => {
    gateway = await npmStart({ SHUTDOWN_TIMEOUT_MS: '600000', BODY_TIMEOUT_MS: '600000' });
    const npmPid = gateway.child.pid as number;
    // An admin request whose body never finishes stays in flight for the whole drain.
    const head = `POST /admin/keys HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${ADMIN_SECRET}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`;
    const inFlight = await rawConnection(gateway.url, head);
    process.kill(npmPid, 'SIGINT');
    await until(() => gateway!.output.join('').includes('draining'), 'drain started', 15_000);
    expect(groupAlive(npmPid)).toBe(true);
    // Past the window in which a terminal's Ctrl-C and npm's forwarded copy count as one press.
    await new Promise((resolve) => setTimeout(resolve, 600));
    process.kill(npmPid, 'SIGINT');
    await until(() => !groupAlive(npmPid), 'every process of npm start gone', 15_000);
    expect(await inFlight.closedByServer()).toBe(true);
  });
});
