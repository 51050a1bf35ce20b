import type { StoredImagesTable } from '../../src/db/schema';
import { newSortableId } from '../../src/shared/ids';
import { generationRow } from '../helpers/generation-rows';
import { type TestGateway, SERVICE_TOKEN, startTestGateway } from '../helpers/test-gateway';
import { claimedPng, dataUri, testPng } from '../helpers/test-images';
import { until } from '../helpers/until';

/** Image inputs on the gateway's own API (`images`, `mask`) and the internal one; OpenAI edits are in openai-edits.test.ts. */
describe('image inputs on POST /images/generate and the internal createGeneration', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const auth = (key: string) => ({ Authorization: `Bearer ${key}` });
  const creditsUsed = (id: string) => t.api.creditsUsed(id);
  const storedRequestOf = async (generationId: string) => {
    const row = await t.gateway.database.db.selectFrom('generations').select('request').where('id', '=', generationId).executeTakeFirstOrThrow();
    return JSON.parse(row.request as string) as {
      inputs?: { delivery: string; images: Array<{ id: string; format: string; width: number; height: number }>; mask?: { id: string } };
    };
  };
  const inputRows = (generationId: string) =>
    t.gateway.database.db
      .selectFrom('stored_images')
      .selectAll()
      .where('generation_id', '=', generationId)
      .where('role', '!=', 'output')
      .orderBy('role')
      .orderBy('position')
      .execute();

  describe('success', () => {
    it('takes data URIs and a mask synchronously: stored as inputs of the generation, outputs unchanged, charged per image made', async () => {
      const { id, key } = await t.createKey({ credits_quota: 10 });
      const res = await t.api.client(key, {
        prompt: 'the same, at dusk',
        model: 'local-1',
        n: 2,
        size: '32x32',
        response_format: 'b64_json',
        images: [dataUri(testPng(40, 30)), dataUri(testPng(20, 20, { shade: 3 }))],
        mask: dataUri(testPng(40, 30, { alpha: true })),
      });
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(2);
      expect(res.body.usage).toMatchObject({ images: 2, credits_charged: 2 });
      expect(await creditsUsed(id)).toBe(2);
      const stored = await storedRequestOf(res.body.id);
      expect(stored.inputs).toMatchObject({
        delivery: 'inline',
        images: [
          { format: 'png', width: 40, height: 30 },
          { format: 'png', width: 20, height: 20 },
        ],
        mask: { id: expect.stringMatching(/^img_/) },
      });
      const rows = await inputRows(res.body.id);
      expect(rows.map((row) => [row.role, Number(row.position), Number(row.width), Number(row.height)])).toEqual([
        ['input', 0, 40, 30],
        ['input', 1, 20, 20],
        ['mask', 0, 40, 30],
      ]);
      // Kept with the same bytes the client sent.
      const first = await t.gateway.images.readBytes(rows[0]!);
      expect(first.equals(testPng(40, 30))).toBe(true);
    });

    it("takes an img_ id of the key's own earlier output (edit the last picture without re-uploading), stored once", async () => {
      const { key } = await t.createKey();
      const made = await t.api.client(key, { prompt: 'a cat', model: 'local-1', size: '64x64' });
      const imageId = /\/images\/(img_[0-9A-Za-z]+)\?/.exec(made.body.data[0].url)![1]!;
      const res = await t.api.client(key, { prompt: 'the cat, in a hat', model: 'local-1', size: '64x64', images: [imageId] });
      expect(res.status).toBe(200);
      const stored = await storedRequestOf(res.body.id);
      expect(stored.inputs?.images).toEqual([{ id: imageId, format: 'png', width: 64, height: 64 }]);
      // Named by id, not copied.
      expect(await inputRows(res.body.id)).toEqual([]);
      // The GET of the generation shows its outputs only.
      const got = await t.api.send('get', `/generations/${res.body.id}`, { headers: auth(key) });
      expect(got.body.data).toHaveLength(1);
    });

    it('asynchronously: the stored request keeps the input ids and the worker reads them back from the store', async () => {
      const { id, key } = await t.createKey({ credits_quota: 10 });
      const submitted = await t.api.send('post', '/images/generate', {
        headers: { ...auth(key), Prefer: 'respond-async' },
        body: { prompt: 'async edit', model: 'local-1', size: '32x32', images: [dataUri(testPng(16, 16))] },
      });
      expect(submitted.status).toBe(202);
      await until(
        async () => (await t.api.send('get', `/generations/${submitted.body.id}`, { headers: auth(key) })).body.status === 'succeeded',
        'the generation to succeed',
      );
      const stored = await storedRequestOf(submitted.body.id);
      expect(stored.inputs?.images).toHaveLength(1);
      expect(await creditsUsed(id)).toBe(1);
    });

    it("an input past its retention (swept) is no longer the key's to name: 404, nothing charged", async () => {
      const { id, key } = await t.createKey({ credits_quota: 10 });
      const submitted = await t.api.send('post', '/images/generate', {
        headers: { ...auth(key), Prefer: 'respond-async' },
        body: { prompt: 'lost input', model: 'local-1', size: '32x32', images: [dataUri(testPng(16, 16))] },
      });
      expect(submitted.status).toBe(202);
      await until(
        async () => ['succeeded', 'failed'].includes((await t.api.send('get', `/generations/${submitted.body.id}`, { headers: auth(key) })).body.status),
        'the generation to settle',
      );
      // The input swept as the sweeper would, then named again by its id.
      const stored = await storedRequestOf(submitted.body.id);
      const inputId = stored.inputs!.images[0]!.id;
      await t.gateway.images.store.delete(inputId);
      await t.gateway.database.db.updateTable('stored_images').set({ deleted_at: Date.now() }).where('id', '=', inputId).execute();
      const again = await t.api.send('post', '/images/generate', {
        headers: { ...auth(key), Prefer: 'respond-async' },
        body: { prompt: 'lost input', model: 'local-1', size: '32x32', images: [inputId] },
      });
      expect(again.status).toBe(404);
      expect(again.body.error).toMatchObject({ code: 'image_input_not_found', param: 'images[0]' });
      expect(await creditsUsed(id)).toBe(1);
    });

    it("the internal API takes inputs too; an img_ id must be one of this service's", async () => {
      const made = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'internal', model: 'local-1', size: '32x32' });
      expect(made.status).toBe(200);
      const imageId = /\/images\/(img_[0-9A-Za-z]+)\?/.exec(made.body.data[0].url)![1]!;
      const res = await t.internal.service('post', '/api/v1/creative/images/generations', {
        prompt: 'internal edit',
        model: 'local-1',
        size: '32x32',
        images: [imageId, dataUri(testPng(8, 8))],
      });
      expect(res.status).toBe(200);
      expect((await storedRequestOf(res.body.id)).inputs?.images.map((image) => image.width)).toEqual([32, 8]);
      // A key does not own the service's image.
      const { key } = await t.createKey();
      const refused = await t.api.client(key, { prompt: 'x', model: 'local-1', size: '32x32', images: [imageId] });
      expect(refused.status).toBe(404);
      expect(refused.body.error.code).toBe('image_input_not_found');
    });
  });

  describe('takeover', () => {
    it('a generation taken over from a replica that died runs with the inputs its request stored, read back by id', async () => {
      const clientId = SERVICE_TOKEN['CF-Access-Client-Id'];
      const first = await t.internal.service('post', '/api/v1/creative/images/generations', {
        prompt: 'taken over',
        model: 'local-1',
        size: '32x32',
        images: [dataUri(testPng(12, 12)), dataUri(testPng(30, 10, { shade: 1 }))],
      });
      expect(first.status).toBe(200);
      const row = await t.gateway.database.db
        .selectFrom('generations')
        .select(['request', 'client_id'])
        .where('id', '=', first.body.id)
        .executeTakeFirstOrThrow();
      const inputIds = (await storedRequestOf(first.body.id)).inputs!.images.map((image) => image.id);
      // The same stored request, held by a replica whose lease lapsed mid-run.
      const orphanId = newSortableId('gen', Date.now());
      await t.gateway.database.db
        .insertInto('generations')
        .values(
          generationRow(orphanId, {
            client_id: row.client_id ?? clientId,
            request: row.request,
            status: 'running',
            lease_owner: 'replica-that-died',
            lease_expires_at: Date.now() - 1000,
            started_at: Date.now() - 5000,
            created_at: Date.now() - 5000,
            runs: 1,
          }),
        )
        .execute();
      const read: string[] = [];
      const images = t.gateway.images;
      const readBytes = images.readBytes.bind(images);
      images.readBytes = async (stored: StoredImagesTable) => {
        read.push(stored.id);
        return readBytes(stored);
      };
      try {
        await until(async () => {
          const taken = await t.gateway.database.db.selectFrom('generations').select(['status', 'runs']).where('id', '=', orphanId).executeTakeFirstOrThrow();
          return taken.status === 'succeeded' && Number(taken.runs) === 2;
        }, 'the takeover to succeed');
      } finally {
        images.readBytes = readBytes;
      }
      // Read in parallel (the run keeps their order): every stored input, each once.
      expect([...read].sort()).toEqual([...inputIds].sort());
    });
  });

  describe('refusals: each its documented 4xx, nothing charged', () => {
    const refused = async (body: Record<string, unknown>, status: number, code: string, param: string | null, keyOverrides: Record<string, unknown> = {}) => {
      const { id, key } = await t.createKey({ credits_quota: 10, ...keyOverrides });
      const res = await t.api.client(key, { prompt: 'x', model: 'local-1', size: '32x32', ...body });
      expect([res.status, res.body.error?.code, res.body.error?.param]).toEqual([status, code, param]);
      expect(await creditsUsed(id)).toBe(0);
      return res;
    };

    it('a model that takes no images: 400 image_input_unsupported, param images', async () => {
      await refused({ model: 'jimeng-3.1', size: '1328x1328', images: [dataUri(testPng(8, 8))] }, 400, 'image_input_unsupported', 'images', {
        allowed_providers: ['local', 'jimeng'],
      });
    });

    it('more images than the model takes', async () => {
      await refused({ images: Array.from({ length: 5 }, () => dataUri(testPng(8, 8))) }, 400, 'image_input_unsupported', 'images');
    });

    it("more than the gateway takes at all: the spec's maxItems (400 invalid_request)", async () => {
      await refused({ images: Array.from({ length: 17 }, () => dataUri(testPng(2, 2))) }, 400, 'invalid_request', 'images');
    });

    it('a mask without alpha, or of another size', async () => {
      await refused({ images: [dataUri(testPng(8, 8))], mask: dataUri(testPng(8, 8)) }, 400, 'image_input_unsupported', 'mask');
      await refused({ images: [dataUri(testPng(8, 8))], mask: dataUri(testPng(9, 8, { alpha: true })) }, 400, 'image_input_unsupported', 'mask');
    });

    it('bytes that are no image, a malformed data URI', async () => {
      await refused({ images: [dataUri(testPng(8, 8)), dataUri(Buffer.from('<svg/>'), 'image/svg+xml')] }, 400, 'image_input_invalid', 'images[1]');
      await refused({ images: ['data:image/png;base64,%%%%'] }, 400, 'image_input_invalid', 'images[0]');
      await refused({ images: ['img_doesNotExist0'] }, 404, 'image_input_not_found', 'images[0]');
    });

    it("over the model's bytes per image (413), counted from the data URI's length before decoding", async () => {
      const big = Buffer.concat([testPng(8, 8), Buffer.alloc(10 * 1024 * 1024)]);
      await refused({ images: [dataUri(big)] }, 413, 'image_input_too_large', 'images[0]');
    });

    it("a decompression bomb by its header's pixel count (413), before any decoding", async () => {
      await refused({ images: [dataUri(claimedPng(7000, 7000))] }, 413, 'image_input_too_large', 'images[0]');
    });

    it('an https URL to a loopback or private address: 422 image_input_unreachable', async () => {
      await refused({ images: ['https://127.0.0.1/a.png'] }, 422, 'image_input_unreachable', 'images[0]');
      await refused({ images: [dataUri(testPng(8, 8)), 'https://169.254.169.254/latest/meta-data'] }, 422, 'image_input_unreachable', 'images[1]');
      await refused({ images: ['https://localhost:1/a.png'] }, 422, 'image_input_unreachable', 'images[0]');
    });

    it("an img_ id of another key's image: 404, as if it did not exist", async () => {
      const other = await t.createKey();
      const made = await t.api.client(other.key, { prompt: 'mine', model: 'local-1', size: '32x32' });
      const imageId = /\/images\/(img_[0-9A-Za-z]+)\?/.exec(made.body.data[0].url)![1]!;
      await refused({ images: [imageId] }, 404, 'image_input_not_found', 'images[0]');
    });

    it('plain http is not an input source', async () => {
      await refused({ images: ['http://example.com/a.png'] }, 400, 'invalid_request', 'images[0]');
    });
  });
});
