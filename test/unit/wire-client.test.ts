import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { apiChannelClient } from '../../src/channels/channel-clients';
import type { Channel } from '../../src/channels/channel.model';
import { loadConfig } from '../../src/config/config';
import { createProviderRegistry } from '../../src/providers/create-registry';
import { BUILT_IN_PROVIDERS } from '../../src/providers/formats';
import { ImagesApiClient } from '../../src/providers/images-api/images-api-client';
import { VisualTransport } from '../../src/providers/jimeng/visual-transport';
import { LocalProvider } from '../../src/providers/local/local.provider';
import type { ProviderRequest, WireClient } from '../../src/providers/provider';
import { wireClient } from '../../src/providers/wire-client';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';

/**
 * One map from a wire format to its client, used by the environment's accounts and the API's channels
 * alike. What each client was given shows in what it sends: the fakes check the credentials (a wrong
 * key or signature is refused) and record each call.
 */

const VISUAL = { accessKeyId: 'AKwireClient', secretAccessKey: 'SKwireClient' };
const ARK_KEY = 'ark-key-wire-client';
const OPENAI_KEY = 'sk-wire-client';
/** The fakes listen on 127.0.0.1, which a public-only client refuses before sending (EBLOCKEDADDRESS). */
const anyAddress = { pollIntervalMs: 5, publicOnly: false };
const publicOnly = { pollIntervalMs: 5, publicOnly: true };
const signal = () => new AbortController().signal;

const visualRequest = (prompt: string): ProviderRequest => ({
  prompt,
  upstreamModel: 'jimeng_t2i_v40',
  transport: 'visual',
  n: 1,
  width: 2048,
  height: 2048,
  responseFormat: 'b64_json',
});
const arkRequest = (prompt: string, n: number): ProviderRequest => ({
  prompt,
  upstreamModel: 'doubao-seedream-4-5-251128',
  transport: 'ark',
  n,
  width: 2048,
  height: 2048,
  responseFormat: 'b64_json',
});
const openaiRequest = (prompt: string, n: number): ProviderRequest => ({
  prompt,
  upstreamModel: 'gpt-image-1',
  n,
  width: 1024,
  height: 1024,
  responseFormat: 'b64_json',
});

describe('wireClient', () => {
  let visual: FakeVisual;
  let ark: FakeImagesApi;
  let openai: FakeImagesApi;
  beforeAll(async () => {
    visual = await startFakeVisual(VISUAL);
    ark = await startFakeImagesApi({ apiKey: ARK_KEY, flavour: 'ark' });
    openai = await startFakeImagesApi({ apiKey: OPENAI_KEY, flavour: 'openai' });
  });
  afterAll(async () => {
    await visual.close();
    await ark.close();
    await openai.close();
  });

  const arkCalls = (prompt: string) => ark.requests.filter((r) => r.prompt === prompt);
  const openaiCalls = (prompt: string) => openai.requests.filter((r) => r.prompt === prompt);
  const visualCalls = (prompt: string) => visual.requests.filter((r) => r.body.prompt === prompt);

  it('maps each wire format to its client, with the account and settings', async () => {
    expect(wireClient({ format: 'local', provider: 'local' }, anyAddress)).toBeInstanceOf(LocalProvider);

    const visualAccount = {
      format: 'visual',
      provider: 'jimeng',
      baseUrl: visual.url,
      credentials: { access_key_id: VISUAL.accessKeyId, secret_access_key: VISUAL.secretAccessKey },
    };
    const visualClient = wireClient(visualAccount, anyAddress);
    expect(visualClient).toBeInstanceOf(VisualTransport);
    // Signed with the account's keys, at its endpoint.
    expect(await visualClient.generate(visualRequest('visual one'), signal())).toHaveLength(1);
    expect(visualCalls('visual one').length).toBeGreaterThan(0);
    // The poll interval is the settings': two "generating" answers cost two intervals.
    const slow = wireClient(visualAccount, { ...anyAddress, pollIntervalMs: 300 });
    const started = Date.now();
    await slow.generate(visualRequest('visual polled [pending:2]'), signal());
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
    await expect(wireClient(visualAccount, publicOnly).generate(visualRequest('visual public only'), signal())).rejects.toThrow(/EBLOCKEDADDRESS/);
    expect(visualCalls('visual public only')).toEqual([]);

    const arkAccount = { format: 'ark', provider: 'jimeng', baseUrl: `${ark.url}/api/v3`, credentials: { api_key: ARK_KEY } };
    const arkClient = wireClient(arkAccount, anyAddress);
    expect(arkClient).toBeInstanceOf(ImagesApiClient);
    // One image per call; group output is turned off per model, for the models that document it (ark-models.ts).
    expect(await arkClient.generate(arkRequest('ark two', 2), signal())).toHaveLength(2);
    expect(arkCalls('ark two')).toEqual([expect.objectContaining({ watermark: false }), expect.objectContaining({ watermark: false })]);
    await expect(wireClient(arkAccount, publicOnly).generate(arkRequest('ark public only', 1), signal())).rejects.toThrow(/EBLOCKEDADDRESS/);
    expect(arkCalls('ark public only')).toEqual([]);

    const images = wireClient({ format: 'images-api', provider: 'openai', baseUrl: `${openai.url}/v1`, credentials: { api_key: OPENAI_KEY } }, anyAddress);
    expect(images).toBeInstanceOf(ImagesApiClient);
    // `n` in one call, and no field of Ark's.
    expect(await images.generate(openaiRequest('openai two', 2), signal())).toHaveLength(2);
    expect(openaiCalls('openai two')).toEqual([expect.objectContaining({ n: 2 })]);
    expect(openaiCalls('openai two')[0]).not.toHaveProperty('watermark');
  });

  it("builds an API channel's client from its transport and opened credentials, and refuses credentials of another transport", async () => {
    const channel = (transport: Channel['transport'], baseUrl: string): Channel => ({ id: 'chn_test', provider: 'jimeng', transport, baseUrl }) as Channel;
    expect(apiChannelClient(channel('visual', visual.url), { access_key_id: 'AK', secret_access_key: 'SK' }, publicOnly)).toBeInstanceOf(VisualTransport);
    const arkChannel = (settings: typeof publicOnly) => apiChannelClient(channel('ark', `${ark.url}/api/v3`), { api_key: ARK_KEY }, settings);
    await expect(arkChannel(publicOnly).generate(arkRequest('channel public only', 1), signal())).rejects.toThrow(/EBLOCKEDADDRESS/);
    expect(arkCalls('channel public only')).toEqual([]);
    expect(await arkChannel(anyAddress).generate(arkRequest('channel two', 2), signal())).toHaveLength(2);
    expect(arkCalls('channel two')).toHaveLength(2);
    expect(() => apiChannelClient(channel('visual', visual.url), { api_key: 'k' }, publicOnly)).toThrow('visual channels need access_key_id');
    expect(() => apiChannelClient(channel('images-api', openai.url), { access_key_id: 'AK', secret_access_key: 'SK' }, publicOnly)).toThrow(
      'images-api channels need api_key',
    );
  });

  it("gives each environment account's channel its own client from the same map; jimeng is known without accounts", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-wire-'));
    const quiet = () => undefined;
    const bare = createProviderRegistry(loadConfig({ DATABASE_URL: path.join(dir, 'a.db') }, quiet));
    // Every provider a descriptor lists is known before any account exists (formats.ts BUILT_IN_PROVIDERS).
    expect([...bare.names()]).toEqual([...BUILT_IN_PROVIDERS]);
    expect(BUILT_IN_PROVIDERS).toEqual(expect.arrayContaining(['local', 'jimeng']));
    expect(bare.environmentClient('local', 'local')).toBeInstanceOf(LocalProvider);
    expect(bare.environmentClient('jimeng', 'visual')).toBeUndefined();
    expect(bare.environmentClient('jimeng', 'ark')).toBeUndefined();

    const configured = createProviderRegistry(
      loadConfig(
        {
          DATABASE_URL: path.join(dir, 'b.db'),
          VOLC_ACCESS_KEY_ID: VISUAL.accessKeyId,
          VOLC_SECRET_ACCESS_KEY: VISUAL.secretAccessKey,
          VOLC_VISUAL_ENDPOINT: visual.url,
          VOLC_POLL_INTERVAL_MS: '5',
          ARK_API_KEY: ARK_KEY,
          ARK_BASE_URL: `${ark.url}/api/v3`,
          OPENAI_COMPAT_BASE_URL: `${openai.url}/v1`,
          OPENAI_COMPAT_API_KEY: OPENAI_KEY,
        },
        quiet,
      ),
    );
    expect([...configured.names()]).toEqual([...BUILT_IN_PROVIDERS, 'openai-compatible']);
    const client = (provider: string, format: string): WireClient => {
      const found = configured.environmentClient(provider, format);
      if (!found) throw new Error(`no environment client for ${provider} over ${format}`);
      return found;
    };
    // Each with the account's credentials and base URL, and private addresses allowed: the operator set them.
    expect(client('jimeng', 'visual')).toBeInstanceOf(VisualTransport);
    expect(await client('jimeng', 'visual').generate(visualRequest('env visual'), signal())).toHaveLength(1);
    expect(visualCalls('env visual').length).toBeGreaterThan(0);
    expect(await client('jimeng', 'ark').generate(arkRequest('env ark', 2), signal())).toHaveLength(2);
    expect(arkCalls('env ark')).toHaveLength(2);
    expect(await client('openai-compatible', 'images-api').generate(openaiRequest('env openai', 2), signal())).toHaveLength(2);
    expect(openaiCalls('env openai')).toEqual([expect.objectContaining({ n: 2 })]);
    // The account's provider names the upstream in its errors.
    openai.setMode('failing');
    try {
      await expect(client('openai-compatible', 'images-api').generate(openaiRequest('env openai failing', 1), signal())).rejects.toThrow(/openai-compatible/);
    } finally {
      openai.setMode('normal');
    }
    expect(configured.environmentClient('openai', 'ark')).toBeUndefined();
  });
});
