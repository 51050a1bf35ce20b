import { bearer } from '../helpers/admin-tokens';
import { startArkGateway } from '../helpers/ark-gateway';
import type { TestGateway } from '../helpers/test-gateway';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import type { components } from '../../generated/gateway';
import type { GenerationsTable } from '../../src/db/schema';
import { findGeneration } from '../../src/generation/generations.repository';
import { refundUnsentCalls } from '../../src/generation/settlement.repository';

type UsageRow = components['schemas']['UsageReportRow'];

/**
 * What the upstream cost beside what was charged: every settled generation records the upstream's
 * estimated cost in US dollars (its model's money price over what it billed), and usage analytics
 * show it with the margin per model, key, project and channel. A model priced in credits only has
 * no known cost (null, never 0).
 */
describe('upstream cost and margin (generations.upstream_cost_usd, GET /admin/usage)', () => {
  let t: TestGateway;
  let ark: FakeImagesApi;
  let key: { id: string; key: string };

  beforeAll(async () => {
    ({ t, ark } = await startArkGateway({
      env: {
        MODEL_CATALOG: JSON.stringify([
          // $0.03 an image: 3 credits at the default CREDITS_PER_USD (100).
          {
            model: 'priced-ark',
            provider: 'jimeng',
            transport: 'ark',
            upstream_model: 'priced',
            default_size: '1024x1024',
            price: { currency: 'USD', terms: [{ meter: 'image', rate: 0.03 }], source: 'test' },
          },
          { model: 'credits-ark', provider: 'jimeng', transport: 'ark', upstream_model: 'credits', credits_per_image: 3, default_size: '1024x1024' },
        ]),
      },
    }));
    key = await t.createKey({ credits_quota: 100, allowed_providers: ['jimeng'] });
  });
  afterAll(() => t.close());

  const submit = (body: Record<string, unknown>) =>
    t.api.send('post', '/images/generate', { body: { response_format: 'b64_json', ...body }, headers: { Authorization: `Bearer ${key.key}` } });
  const costOf = async (id: string) => (await findGeneration(t.gateway.database.db, id))?.upstream_cost_usd ?? null;
  const usage = async (query: string) => {
    const res = await t.api.admin('get', `/admin/usage?group_by=model${query}`);
    expect(res.status).toBe(200);
    return res.body.data as UsageRow[];
  };
  const idOf = async (model: string, status: string) => {
    const res = await t.api.send('get', `/generations?status=${status}`, { headers: { Authorization: `Bearer ${key.key}` } });
    return (res.body.data as Array<{ id: string; model: string }>).find((generation) => generation.model === model)?.id as string;
  };

  it('a success on a model with a money price records its price in dollars as its cost; margin 0 at no markup', async () => {
    const res = await submit({ prompt: 'a fox', model: 'priced-ark' });
    expect(res.status).toBe(200);
    expect(res.body.usage).toMatchObject({ credits_charged: 3 });
    expect(await costOf(await idOf('priced-ark', 'succeeded'))).toBeCloseTo(0.03, 9);
    expect(await usage('&model=priced-ark')).toEqual([
      expect.objectContaining({ model: 'priced-ark', credits_charged: 3, upstream_cost_usd: 0.03, margin_usd: 0 }),
    ]);
  });

  it('a failed call the upstream may have billed costs its price with no charge: the margin goes negative', async () => {
    // Ark bills an image (usage.generated_images) and delivers none: the request fails uncharged.
    const res = await submit({ prompt: 'a fox [empty] [billed:1]', model: 'priced-ark' });
    expect(res.status).toBe(502);
    const failed = await idOf('priced-ark', 'failed');
    expect(await findGeneration(t.gateway.database.db, failed)).toMatchObject({ status: 'failed', charged_credits: 0, unbilled_images: 1 });
    expect(await costOf(failed)).toBeCloseTo(0.03, 9);
    expect(await usage('&model=priced-ark')).toEqual([
      expect.objectContaining({ model: 'priced-ark', succeeded: 1, failed: 1, credits_charged: 3, upstream_cost_usd: 0.06, margin_usd: -0.03 }),
    ]);
  });

  it('a model priced in credits only has no known cost: null, not 0, and no margin', async () => {
    const res = await submit({ prompt: 'a fox', model: 'credits-ark' });
    expect(res.status).toBe(200);
    expect(await costOf(await idOf('credits-ark', 'succeeded'))).toBeNull();
    expect(await usage('&model=credits-ark')).toEqual([expect.objectContaining({ credits_charged: 3, upstream_cost_usd: null, margin_usd: null })]);
  });

  it('per key the margin sets only the credits of costed generations against their cost; the CSV carries both', async () => {
    const [row] = (await t.api.admin('get', `/admin/usage?group_by=key&key_id=${key.id}`)).body.data as UsageRow[];
    // 6 credits charged, 3 of them for generations with a known cost ($0.06).
    expect(row).toMatchObject({ key_id: key.id, credits_charged: 6, upstream_cost_usd: 0.06, margin_usd: -0.03 });
    const csv = await t.api.send('get', '/admin/usage?group_by=model&order=credits_desc', {
      headers: { ...bearer('test-admin-secret-0123456789'), Accept: 'text/csv' },
    });
    expect(csv.status).toBe(200);
    const [header, ...lines] = (csv.text as string).trim().split('\r\n');
    const columns = (header as string).split(',');
    const cells = (model: string) => {
      const line = lines.find((candidate) => candidate.startsWith(`${model},`)) as string;
      const values = line.split(',');
      return { cost: values[columns.indexOf('upstream_cost_usd')], margin: values[columns.indexOf('margin_usd')] };
    };
    expect(columns).toEqual(expect.arrayContaining(['credits_charged', 'upstream_cost_usd', 'margin_usd']));
    expect(cells('priced-ark')).toEqual({ cost: '0.06', margin: '-0.03' });
    expect(cells('credits-ark')).toEqual({ cost: '', margin: '' });
  });

  it('a cancel that keeps the credits of its sent call costs that call upstream, on its own rollup row', async () => {
    const other = await t.createKey({ credits_quota: 100, allowed_providers: ['jimeng'] });
    const auth = { Authorization: `Bearer ${other.key}` };
    const started = await t.api.send('post', '/images/generate', {
      body: { prompt: 'a fox [hold:c1]', model: 'priced-ark' },
      headers: { ...auth, Prefer: 'respond-async' },
    });
    expect(started.status).toBe(202);
    await ark.whenHeld('c1');
    const canceled = await t.api.send('post', `/generations/${started.body.id}/cancel`, { headers: auth });
    expect(canceled.body).toMatchObject({ status: 'canceled', usage: { credits_charged: 3 } });
    ark.releaseHeld('c1');
    expect(await costOf(started.body.id)).toBeCloseTo(0.03, 9);
    const [row] = (await t.api.admin('get', `/admin/usage?group_by=key&key_id=${other.id}`)).body.data as UsageRow[];
    expect(row).toMatchObject({ canceled: 1, credits_charged: 3, upstream_cost_usd: 0.03, margin_usd: 0 });
    // A synchronous run that learns it never sent the call gives its credits back: its cost goes with them.
    const db = t.gateway.database.db;
    const generation = (await findGeneration(db, started.body.id)) as GenerationsTable;
    expect(await db.transaction().execute((trx) => refundUnsentCalls(trx, generation, 0))).toBe(3);
    expect(await costOf(started.body.id)).toBe(0);
    const [after] = (await t.api.admin('get', `/admin/usage?group_by=key&key_id=${other.id}`)).body.data as UsageRow[];
    expect(after).toMatchObject({ canceled: 1, credits_charged: 0, upstream_cost_usd: 0, margin_usd: 0 });
  });
});
