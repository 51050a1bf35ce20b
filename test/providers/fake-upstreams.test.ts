import { FORMATS } from '../../src/providers/formats';
import { type FakeUpstreams, startFakeUpstreams } from '../fakes/start';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * `npm run fake-upstreams` (test/fakes/start.ts): a fake for every registered format that calls an
 * upstream, and the environment it prints points a gateway at all of them, each model served.
 */
describe('npm run fake-upstreams', () => {
  let upstreams: FakeUpstreams;
  let t: TestGateway;

  beforeAll(async () => {
    upstreams = await startFakeUpstreams(5);
    // Exactly the printed environment, over the test gateway's (which allows private upstreams itself).
    t = await startTestGateway({ CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'false', ...upstreams.env });
  });
  afterAll(async () => {
    await t?.close();
    await upstreams?.close();
  });

  it('starts the fake of every format of the registry that calls an upstream', () => {
    expect(upstreams.missing).toEqual([]);
    expect(upstreams.fakes.map((fake) => fake.format).sort()).toEqual(
      FORMATS.filter((descriptor) => !descriptor.offline)
        .map((descriptor) => descriptor.format)
        .sort(),
    );
  });

  it("its environment serves a generation of each fake's model", async () => {
    const { key } = await t.createKey({ allowed_providers: [...new Set(upstreams.fakes.map((fake) => fake.provider))] });
    for (const fake of upstreams.fakes) {
      const res = await t.api.client(key, { prompt: `a lighthouse over ${fake.format}`, model: fake.model, size: fake.size });
      expect([fake.format, res.status, res.body.error?.message]).toEqual([fake.format, 200, undefined]);
    }
  }, 60_000);
});
