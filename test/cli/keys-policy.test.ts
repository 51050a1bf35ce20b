import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { cliRunner } from './cli-harness';

describe('admin CLI: key policy (max_concurrent, allowed_ips, allowed_models, metadata, alert_thresholds) and keys list --metadata', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());
  const { cli, json, usageError, help } = cliRunner(() => t);
  const base = ['--owner', 'policy@example.com', '--credits', '10', '--period-days', '30'];

  it('keys create --help lists the policy options and exits 0', async () => {
    expect(await help(['keys', 'create', '--help'])).toMatch(
      /--max-concurrent <n>[\s\S]*--allowed-ips <list>[\s\S]*--allowed-models <list>[\s\S]*--metadata <name=value>[\s\S]*--alert-thresholds <list>/,
    );
  });

  it.each([
    [['keys', 'create', '--name', 'x', ...base, '--metadata', 'team'], /'team' is invalid/],
    [['keys', 'create', '--name', 'x', ...base, '--alert-thresholds', '80,lots'], /'80,lots' is invalid/],
    [['keys', 'create', '--name', 'x', ...base, '--max-concurrent', 'many'], /'many' is invalid/],
    [['keys', 'create', '--name', 'x', ...base, '--expires-in-days', '3', '--expires-at', '2099-01-01T00:00:00Z'], /not both/],
  ])('usage error %j exits 2', async (args, message) => {
    await usageError(args, message);
  });

  it('create with every policy option, filter by metadata, update and clear them ("none")', async () => {
    const key = await json([
      'keys',
      'create',
      '--name',
      'policy',
      ...base,
      '--providers',
      'local',
      '--max-concurrent',
      '3',
      '--allowed-ips',
      '127.0.0.1,10.0.0.0/8',
      '--allowed-models',
      'local-1',
      '--metadata',
      'team=design',
      '--metadata',
      'cost_center=4711',
      '--alert-thresholds',
      '50,90',
      '--expires-at',
      '2099-01-01T00:00:00Z',
    ]);
    expect(key).toMatchObject({
      max_concurrent: 3,
      allowed_ips: ['127.0.0.1', '10.0.0.0/8'],
      allowed_models: ['local-1'],
      metadata: { team: 'design', cost_center: '4711' },
      alert_thresholds: [50, 90],
      expires_at: '2099-01-01T00:00:00.000Z',
    });
    const other = await json(['keys', 'create', '--name', 'other', ...base, '--metadata', 'team=ops']);

    const byTeam = await json(['keys', 'list', '--metadata', 'team:design']);
    expect(byTeam.data.map((k: { id: string }) => k.id)).toEqual([key.id]);
    expect((await json(['keys', 'list', '--metadata', 'team:ops'])).data.map((k: { id: string }) => k.id)).toEqual([other.id]);

    const shown = await cli(['keys', 'get', key.id]);
    expect(shown.stdout).toMatch(/^max_concurrent:\s+3$/m);
    expect(shown.stdout).toMatch(/^metadata:\s+team=design,cost_center=4711$/m);

    const updated = await json([
      'keys',
      'update',
      key.id,
      '--max-concurrent',
      'none',
      '--allowed-ips',
      'none',
      '--allowed-models',
      'none',
      '--metadata',
      'team=ops',
      '--alert-thresholds',
      '',
      '--expires-at',
      'never',
    ]);
    expect(updated).toMatchObject({
      max_concurrent: null,
      allowed_ips: null,
      allowed_models: null,
      metadata: { team: 'ops' },
      alert_thresholds: [],
      expires_at: null,
    });
  });

  it("API errors exit 1 with the API's message", async () => {
    const badIp = await cli(['keys', 'create', '--name', 'x', ...base, '--allowed-ips', 'not-an-address']);
    expect(badIp).toMatchObject({ code: 1, stdout: '' });
    expect(badIp.stderr).toMatch(/^error: 400 /);
    const badFilter = await cli(['keys', 'list', '--metadata', 'no colon here']);
    expect(badFilter.code).toBe(1);
    expect(badFilter.stderr).toMatch(/^error: 400 /);
  });
});
