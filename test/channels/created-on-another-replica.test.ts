import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { addChannel } from '../helpers/channels';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * Two gateways on one database stand for two replicas. Each keeps the channel list for a second; a
 * model with no channel in that list is read again before it is refused, so a channel created on one
 * replica serves on the other from the next request on (openapi: createChannel).
 */
describe('a channel created on another replica', () => {
  const SEALING_KEY = '5a'.repeat(32);
  let ark: FakeImagesApi;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    ark = await startFakeImagesApi({ apiKey: 'ark-key-replicas-0001', flavour: 'ark' });
    a = await startTestGateway({ CHANNEL_SEALING_KEY: SEALING_KEY });
    b = await startTestGateway({ DATABASE_URL: a.databaseUrl, CHANNEL_SEALING_KEY: SEALING_KEY });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
    await ark.close();
  });

  it('serves on this replica at once, although its cached list (read just before) had no channel for the model', async () => {
    const { key } = await a.createKey({ allowed_providers: ['jimeng'] });
    const generate = () => b.api.client(key, { prompt: 'a harbour at night', model: 'jimeng-4.5', response_format: 'b64_json' });
    // Replica B reads its channel list now: none serves the model.
    const before = await generate();
    expect([before.status, before.body.error?.code]).toEqual([503, 'provider_unavailable']);

    await addChannel(a.api, {
      name: 'ark on replica a',
      provider: 'jimeng',
      transport: 'ark',
      base_url: ark.url,
      models: [{ model: 'jimeng-4.5' }],
      credentials: { api_key: 'ark-key-replicas-0001' },
    });
    const after = await generate();
    expect(after.status).toBe(200);
    expect(ark.requests).toHaveLength(1);
  });
});
