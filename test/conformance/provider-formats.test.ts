import fs from 'node:fs';
import path from 'node:path';
import { FORMATS } from '../../src/providers/formats';
import { FORMAT_FAKES } from '../fakes/format-fakes';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

const upstreamFormats = FORMATS.filter((descriptor) => !descriptor.offline);
const providersDoc = fs.readFileSync(path.join(__dirname, '../../docs/operators/providers.md'), 'utf8');

/**
 * Every registered wire format, through its environment account to its fake: a synchronous and an
 * asynchronous generation, on the native and the OpenAI-compatible paths, every response checked
 * against the spec. A format registered without a fake, a scenario or its docs fails here.
 */
describe("every registered wire format has a fake, a scenario and its row in the operators' providers page", () => {
  it.each(upstreamFormats.map((descriptor) => descriptor.format))(
    '%s: a fake in test/fakes/format-fakes.ts and a row naming it in docs/operators/providers.md',
    (format) => {
      expect({ format, fake: typeof FORMAT_FAKES[format] }).toEqual({ format, fake: 'function' });
      expect({ format, documented: providersDoc.split('\n').some((line) => line.startsWith('|') && line.includes(`\`${format}\``)) }).toEqual({
        format,
        documented: true,
      });
    },
  );

  describe.each(upstreamFormats.map((descriptor) => descriptor.format).filter((format) => FORMAT_FAKES[format] !== undefined))('%s', (format) => {
    let t: TestGateway;
    let close: () => Promise<void>;
    let key: string;
    let model: string;
    let size: string;

    beforeAll(async () => {
      const fake = await (FORMAT_FAKES[format] as () => ReturnType<(typeof FORMAT_FAKES)[string]>)();
      ({ model, size, close } = fake);
      t = await startTestGateway(fake.env);
      ({ key } = await t.createKey({ allowed_providers: [fake.provider], credits_quota: 1000 }));
    });
    afterAll(async () => {
      await t?.close();
      await close?.();
    });

    const auth = () => ({ Authorization: `Bearer ${key}` });

    it('native, synchronous: stored images and the charge of one image', async () => {
      const res = await t.api.send('post', '/images/generate', {
        body: { prompt: `a ${format} lighthouse`, model, size, response_format: 'b64_json' },
        headers: auth(),
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ model, data: [{ b64_json: expect.any(String) }], usage: { images: 1 } });
    });

    it('OpenAI-compatible, synchronous, url', async () => {
      const res = await t.api.send('post', '/v1/images/generations', { body: { prompt: `an ${format} harbour`, model, size }, headers: auth() });
      expect(res.status).toBe(200);
      expect(res.body.data[0].url).toEqual(expect.stringContaining('/images/img_'));
    });

    it('native, asynchronous: queued, then succeeded', async () => {
      const res = await t.api.send('post', '/images/generate', {
        body: { prompt: `a ${format} field`, model, size },
        headers: { ...auth(), Prefer: 'respond-async' },
      });
      expect(res.status).toBe(202);
      const status = async () => (await t.api.send('get', `/generations/${res.body.id}`, { headers: auth() })).body.status as string;
      await until(async () => (await status()) === 'succeeded', `the ${format} generation to succeed`);
    });
  });
});
