import { DEFAULT_CATALOG } from '../../src/config/catalog';
import { type GatewayProcess, MAIN_JS, startGatewayProcess } from '../helpers/gateway-process';
import { killGroup } from '../helpers/process-tree';
import { until } from '../helpers/until';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';

/** What `npm start` prints once it serves: JSON for log collectors, and words for a person at a terminal. */
describe('the startup output', () => {
  let database: ThrowawayDatabase;
  let gateway: GatewayProcess | undefined;
  beforeAll(async () => {
    database = await createThrowawayDatabase('sqlite');
  });
  afterEach(async () => {
    if (gateway?.child.pid !== undefined) killGroup(gateway.child.pid);
    await gateway?.stop('SIGKILL');
    gateway = undefined;
  });
  afterAll(async () => {
    await database.drop();
  });

  const listeningLine = (output: string[]) =>
    JSON.parse(
      output
        .join('')
        .split('\n')
        .find((line) => line.includes('"msg":"gateway listening"'))!
        .replace(/^[^{]*/, '')
        .trim(),
    ) as Record<string, unknown>;

  it('off a terminal: one JSON line carries the URLs and the models in service, no words', async () => {
    gateway = await startGatewayProcess({ DATABASE_URL: database.url }, { detached: true });
    const port = new URL(gateway.url).port;
    const internalPort = new URL(gateway.internalUrl).port;
    expect(listeningLine(gateway.output)).toMatchObject({
      urls: {
        api: `http://127.0.0.1:${port}`,
        docs: `http://127.0.0.1:${port}/docs`,
        console: `http://127.0.0.1:${port}/console`,
        internal: `http://127.0.0.1:${internalPort}`,
      },
      // The built-in catalog: local-1 is served in-process, every other model needs a channel this gateway has not.
      models: DEFAULT_CATALOG.map(({ model }) => ({ model, status: model === 'local-1' ? 'available' : 'unconfigured' })),
    });
    expect(gateway.output.join('')).not.toContain('creative-gateway listening on');
  });

  it('at a terminal: the URLs and the models in words, after the JSON', async () => {
    // script(1) runs the gateway on a pseudo-terminal, as `npm start` in a shell.
    gateway = await startGatewayProcess(
      { DATABASE_URL: database.url },
      { command: ['script', '-qfec', `${process.execPath} ${MAIN_JS}`, '/dev/null'], detached: true },
    );
    await until(() => gateway!.output.join('').includes('models: '), 'the models line', 20_000);
    const port = new URL(gateway.url).port;
    const internalPort = new URL(gateway.internalUrl).port;
    const text = gateway.output.join('').replace(/\r/g, '');
    expect(text).toContain(
      `creative-gateway listening on http://127.0.0.1:${port}: API reference http://127.0.0.1:${port}/docs, console http://127.0.0.1:${port}/console, internal API http://127.0.0.1:${internalPort}\n`,
    );
    expect(text).toContain(`models: ${DEFAULT_CATALOG.map(({ model }) => (model === 'local-1' ? model : `${model} (no channel)`)).join(', ')}\n`);
    expect(text).toContain('models: local-1, jimeng-4.0 (no channel), ');
  });
});
