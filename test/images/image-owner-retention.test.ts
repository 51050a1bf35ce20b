import { sweepOnce } from '../../src/maintenance/sweeper';
import { migration as storedImageOwners } from '../../src/db/migrations/0022_stored_image_owners';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

const DAY = 86_400_000;
const HOUR = 3_600_000;

const imageIdOf = (url: string) => (/\/images\/(img_[0-9A-Za-z]+)\?/.exec(url) as RegExpExecArray)[1] as string;

/**
 * Issue #39 §3: a stored image carries its owner (the key, or the internal API's service client), so
 * its `img_` id stays an input for that owner until the image's own retention ends, also after
 * GENERATION_RETENTION_DAYS deleted the generation that made it (docs/clients/image-inputs.md).
 */
describe('img_ inputs outlive their generation rows until the image retention ends', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // Images kept 60 days, generation rows 30: between the two the image is the only record of its owner.
    t = await startTestGateway({ IMAGE_RETENTION_HOURS: String(60 * 24), GENERATION_RETENTION_DAYS: '30' });
  });
  afterAll(() => t.close());

  const sweep = () => sweepOnce({ db: t.gateway.database.db, clock: t.clock, staleAfterMs: { local: HOUR }, generationRetentionMs: 30 * DAY });
  const edit = (key: string, imageId: string) => t.api.client(key, { prompt: 'the same, in a hat', model: 'local-1', size: '32x32', images: [imageId] });
  const editAsService = (imageId: string) =>
    t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'the same, in a hat', model: 'local-1', size: '32x32', images: [imageId] });

  it('the key (and the service) that made an image use it as an input after its generation row is deleted; no one else does; none after the image expires', async () => {
    const { key } = await t.createKey();
    const other = await t.createKey();
    const made = await t.api.client(key, { prompt: 'a cat', model: 'local-1', size: '32x32', response_format: 'url' });
    expect(made.status).toBe(200);
    const imageId = imageIdOf(made.body.data[0].url);
    const service = await t.internal.service('post', '/api/v1/creative/images/generations', { prompt: 'a dog', model: 'local-1', size: '32x32' });
    expect(service.status).toBe(200);
    const serviceImageId = imageIdOf(service.body.data[0].url);

    t.clock.advanceDays(31);
    expect((await sweep()).generationsPruned).toBeGreaterThanOrEqual(2);
    // The generation rows are gone; the images are still kept.
    expect((await t.api.send('get', `/generations/${made.body.id}`, { headers: { Authorization: `Bearer ${key}` } })).status).toBe(404);
    expect((await t.internal.service('get', `/api/v1/creative/generations/${service.body.id}`)).status).toBe(404);

    expect((await edit(key, imageId)).status).toBe(200);
    expect((await editAsService(serviceImageId)).status).toBe(200);
    for (const refused of [await edit(other.key, imageId), await edit(key, serviceImageId), await editAsService(imageId)]) {
      expect([refused.status, refused.body.error.code, refused.body.error.param]).toEqual([404, 'image_input_not_found', 'images[0]']);
    }

    t.clock.advanceDays(30);
    const expired = await edit(key, imageId);
    expect([expired.status, expired.body.error.code]).toEqual([404, 'image_input_not_found']);
  });

  it('the migration gives images stored before it the owner of their generation', async () => {
    const db = t.gateway.database.db;
    const { key } = await t.createKey();
    const made = await t.api.client(key, { prompt: 'a bird', model: 'local-1', size: '32x32', response_format: 'url' });
    const imageId = imageIdOf(made.body.data[0].url);
    // The table as it was before the migration (no owner columns), then the migration.
    await storedImageOwners.down?.(db as never);
    await storedImageOwners.up(db as never);
    t.clock.advanceDays(31);
    await sweep();
    expect((await t.api.send('get', `/generations/${made.body.id}`, { headers: { Authorization: `Bearer ${key}` } })).status).toBe(404);
    expect((await edit(key, imageId)).status).toBe(200);
  });
});
