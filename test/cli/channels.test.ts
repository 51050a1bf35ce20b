import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { cliRunner } from './cli-harness';

const ARK_KEY = 'ark-key-cli-account-0001';
const ROTATED_KEY = 'ark-key-cli-rotated-0002';

describe('admin CLI: channels (createChannel, listChannels, getChannel, updateChannel, deleteChannel, testChannel)', () => {
  let ark: FakeImagesApi;
  let t: TestGateway;
  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' });
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t.close();
    await ark.close();
  });
  const { cli, json, usageError, help } = cliRunner(() => t);

  it.each([[['channels', 'create', '-h']], [['channels', 'update', '--help']]])('%j prints help, with the credential options, and exits 0', async (args) => {
    expect(await help(args)).toMatch(/--credentials-stdin[\s\S]*--api-key-env <VAR>[\s\S]*never taken from the command line/);
  });

  it('channels create -h lists every transport of the provider registry, with an example each', async () => {
    const text = await help(['channels', 'create', '-h']);
    expect(text).toContain('Transports (--transport), from the provider registry:');
    for (const transport of ['visual', 'ark', 'images-api', 'fal', 'bfl', 'openai', 'gemini']) {
      expect(text).toMatch(new RegExp(`^ {2}${transport}: [\\s\\S]*?e\\.g\\. creative-gateway channels create .*--transport ${transport} `, 'm'));
    }
  });

  it('channels --help lists every command and exits 0', async () => {
    expect(await help(['channels', '--help'])).toMatch(/create[\s\S]*list[\s\S]*update[\s\S]*get[\s\S]*delete[\s\S]*test/);
  });

  it.each([
    [['channels', 'create', '--name', 'x', '--provider', 'jimeng'], /required option '--transport <transport>' not specified/],
    [['channels', 'create', '--name', 'x', '--provider', 'jimeng', '--transport', 'ark', '--api-key-env', 'K'], /required option '--model/],
    [['channels', 'create', '--name', 'x', '--provider', 'jimeng', '--transport', 'ark', '--model', 'jimeng-4.5'], /give the credentials/],
    [
      ['channels', 'create', '--name', 'x', '--provider', 'jimeng', '--transport', 'ark', '--model', 'jimeng-4.5', '--api-key-env', 'UNSET_VARIABLE'],
      /UNSET_VARIABLE is not set/,
    ],
    [['channels', 'create', '--name', 'x', '--provider', 'jimeng', '--transport', 'ark', '--model', 'a=b=c'], /'a=b=c' is invalid/],
    [['channels', 'update', 'chn_x'], /nothing to change/],
    [['channels', 'update', 'chn_x', '--enable', '--disable'], /contradict/],
    [['channels', 'update', 'chn_x', '--rpm', 'lots'], /'lots' is invalid/],
    [['channels', 'get'], /missing required argument 'id'/],
  ])('usage error %j exits 2', async (args, message) => {
    await usageError(args, message);
  });

  it('stdin that is not JSON is a usage error', async () => {
    const args = ['channels', 'create', '--name', 'x', '--provider', 'jimeng', '--transport', 'ark', '--model', 'jimeng-4.5', '--credentials-stdin'];
    await usageError(args, /stdin must hold the credentials as JSON/, { stdin: ARK_KEY });
  });

  it('create (credentials from stdin, never in argv), list, get, test, update (credentials from env), disable/enable, delete', async () => {
    const create = await cli(
      [
        'channels',
        'create',
        '--name',
        'cli ark',
        '--provider',
        'jimeng',
        '--transport',
        'ark',
        '--base-url',
        ark.url,
        '--model',
        'jimeng-4.5=doubao-seedream-4-5-custom',
        '--priority',
        '-5',
        '--weight',
        '3',
        '--max-concurrency',
        '4',
        '--rpm',
        '100',
        '--ipm',
        '200',
        '--timeout-ms',
        '5000',
        '--credentials-stdin',
        '--json',
      ],
      { stdin: JSON.stringify({ api_key: ARK_KEY }) },
    );
    expect(create).toMatchObject({ code: 0, stderr: '' });
    // What `ps` showed while the CLI ran: the command, never the credential.
    expect(create.cmdline).toContain('channels create');
    expect(create.cmdline).not.toContain(ARK_KEY);
    expect(create.stdout).not.toContain(ARK_KEY);
    const channel = JSON.parse(create.stdout);
    expect(channel).toMatchObject({
      id: expect.stringMatching(/^chn_/),
      provider: 'jimeng',
      transport: 'ark',
      base_url: ark.url,
      models: [{ model: 'jimeng-4.5', upstream_model: 'doubao-seedream-4-5-custom' }],
      priority: -5,
      weight: 3,
      max_concurrency: 4,
      rpm: 100,
      ipm: 200,
      timeout_ms: 5000,
      status: 'enabled',
      credentials_hint: 'ark-...0001',
    });

    const list = await cli(['channels', 'list', '--provider', 'jimeng', '--status', 'enabled']);
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+PROVIDER\s+TRANSPORT\s+STATUS\s+PRIORITY\s+WEIGHT\s+MODELS\s+SOURCE$/);
    expect(list.stdout).toMatch(new RegExp(`^${channel.id}\\s+cli ark\\s+jimeng\\s+ark\\s+enabled\\s+-5\\s+3\\s+jimeng-4.5\\s+api$`, 'm'));
    expect((await json(['channels', 'get', channel.id])).credentials_hint).toBe('ark-...0001');

    // The stored credential reaches the upstream: the test call passes.
    expect(await json(['channels', 'test', channel.id, '--model', 'jimeng-4.5'])).toMatchObject({ outcome: 'ok', error_code: null });
    ark.setApiKey(ROTATED_KEY);
    // A failed test prints the answer and exits 1, so a script (or `&&`) sees it.
    const failed = await cli(['channels', 'test', channel.id, '--json']);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ outcome: 'failed' });
    expect(failed.stderr).toMatch(/^error: the channel test failed: \w+/);
    const failedText = await cli(['channels', 'test', channel.id]);
    expect(failedText.code).toBe(1);
    expect(failedText.stdout).toMatch(/^outcome:\s+failed$/m);

    const update = await cli(['channels', 'update', channel.id, '--api-key-env', 'ARK_API_KEY', '--rpm', 'none', '--name', 'renamed', '--json'], {
      env: { ARK_API_KEY: ROTATED_KEY },
    });
    expect(update).toMatchObject({ code: 0, stderr: '' });
    expect(update.cmdline).not.toContain(ROTATED_KEY);
    expect(JSON.parse(update.stdout)).toMatchObject({ name: 'renamed', rpm: null, credentials_hint: 'ark-...0002' });
    expect(await json(['channels', 'test', channel.id])).toMatchObject({ outcome: 'ok', channel: { status: 'enabled' } });

    expect((await json(['channels', 'update', channel.id, '--disable'])).status).toBe('disabled');
    expect((await json(['channels', 'update', channel.id, '--enable'])).status).toBe('enabled');

    const shown = await cli(['channels', 'get', channel.id]);
    expect(shown.stdout).toMatch(/^models:\s+jimeng-4.5=doubao-seedream-4-5-custom$/m);
    for (const secret of [ARK_KEY, ROTATED_KEY]) expect(shown.stdout).not.toContain(secret);

    expect(await cli(['channels', 'delete', channel.id])).toMatchObject({ code: 0, stdout: `deleted ${channel.id}\n` });
    const gone = await cli(['channels', 'get', channel.id]);
    expect(gone).toMatchObject({ code: 1, stdout: '' });
    expect(gone.stderr).toMatch(/^error: 404 \w+: /);
  });

  it("API errors exit 1 with the API's message", async () => {
    const missing = await cli(['channels', 'delete', 'chn_nope']);
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toMatch(/^error: 404 \w+: /);
    const visualWithApiKey = await cli(
      ['channels', 'create', '--name', 'x', '--provider', 'jimeng', '--transport', 'visual', '--model', 'jimeng-4.0', '--api-key-env', 'K'],
      {
        env: { K: 'some-key' },
      },
    );
    expect(visualWithApiKey.code).toBe(1);
    expect(visualWithApiKey.stderr).toMatch(/^error: 400 /);
  });
});
