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
import { wireClient } from '../../src/providers/wire-client';

/** One map from a wire format to its client, used by the environment's accounts and the API's channels alike. */

const settings = { pollIntervalMs: 1000, publicOnly: true };
/** The options a client was built with (private fields, read only to check the map). */
const optionsOf = (client: unknown) => (client as { options: Record<string, unknown> }).options;

describe('wireClient', () => {
  it('maps each wire format to its client, with the account and settings', () => {
    expect(wireClient({ format: 'local', provider: 'local' }, settings)).toBeInstanceOf(LocalProvider);

    const visual = wireClient({ format: 'visual', provider: 'jimeng', baseUrl: 'https://visual.example', credentials: { access_key_id: 'AK', secret_access_key: 'SK' } }, settings);
    expect(visual).toBeInstanceOf(VisualTransport);
    expect(optionsOf(visual)).toEqual({ endpoint: 'https://visual.example', credentials: { accessKeyId: 'AK', secretAccessKey: 'SK' }, pollIntervalMs: 1000, publicOnly: true });

    const ark = wireClient({ format: 'ark', provider: 'jimeng', baseUrl: 'https://ark.example/api/v3', credentials: { api_key: 'ark-key' } }, settings);
    expect(ark).toBeInstanceOf(ImagesApiClient);
    expect(optionsOf(ark)).toMatchObject({ provider: 'jimeng', baseUrl: 'https://ark.example/api/v3', apiKey: 'ark-key', oneImagePerCall: true, publicOnly: true });
    // Group output is turned off per model, for the models that document it (ark-models.ts).
    expect(optionsOf(ark).extraBody).toEqual({ watermark: false });

    const images = wireClient({ format: 'images-api', provider: 'openai', baseUrl: 'https://api.example/v1', credentials: { api_key: 'sk-x' } }, { ...settings, publicOnly: false });
    expect(images).toBeInstanceOf(ImagesApiClient);
    expect(optionsOf(images)).toMatchObject({ provider: 'openai', oneImagePerCall: false, publicOnly: false });
    expect(optionsOf(images).extraBody).toBeUndefined();
  });

  it("builds an API channel's client from its transport and opened credentials, and refuses credentials of another transport", () => {
    const channel = (transport: Channel['transport']): Channel =>
      ({ id: 'chn_test', provider: 'jimeng', transport, baseUrl: 'https://up.example' }) as Channel;
    expect(apiChannelClient(channel('visual'), { access_key_id: 'AK', secret_access_key: 'SK' }, settings)).toBeInstanceOf(VisualTransport);
    expect(optionsOf(apiChannelClient(channel('ark'), { api_key: 'k' }, settings))).toMatchObject({ oneImagePerCall: true, publicOnly: true });
    expect(() => apiChannelClient(channel('visual'), { api_key: 'k' }, settings)).toThrow('visual channels need access_key_id');
    expect(() => apiChannelClient(channel('images-api'), { access_key_id: 'AK', secret_access_key: 'SK' }, settings)).toThrow('images-api channels need api_key');
  });

  it("gives each environment account's channel its own client from the same map; jimeng is known without accounts", () => {
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
          VOLC_ACCESS_KEY_ID: 'AKENV',
          VOLC_SECRET_ACCESS_KEY: 'SKENV',
          ARK_API_KEY: 'ark-env',
          OPENAI_COMPAT_BASE_URL: 'http://127.0.0.1:9/v1',
          OPENAI_COMPAT_API_KEY: 'sk-env',
        },
        quiet,
      ),
    );
    expect([...configured.names()]).toEqual([...BUILT_IN_PROVIDERS, 'openai-compatible']);
    const visual = configured.environmentClient('jimeng', 'visual');
    expect(visual).toBeInstanceOf(VisualTransport);
    expect(optionsOf(visual)).toMatchObject({ credentials: { accessKeyId: 'AKENV', secretAccessKey: 'SKENV' }, publicOnly: false });
    expect(optionsOf(configured.environmentClient('jimeng', 'ark'))).toMatchObject({ apiKey: 'ark-env', oneImagePerCall: true, publicOnly: false });
    expect(optionsOf(configured.environmentClient('openai-compatible', 'images-api'))).toMatchObject({ provider: 'openai-compatible', apiKey: 'sk-env', baseUrl: 'http://127.0.0.1:9/v1', oneImagePerCall: false });
    expect(configured.environmentClient('openai', 'ark')).toBeUndefined();
  });
});
