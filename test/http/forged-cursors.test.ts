import type { Response } from 'supertest';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import { bucketStartOf } from '../../src/usage/usage-query';

const HOUR = 3_600_000;

/** A cursor with its position (the base64url text before any `.`) changed and the rest kept. */
function tampered(cursor: string, change: (position: string) => string): string {
  const dot = cursor.indexOf('.');
  const [position, rest] = dot < 0 ? [cursor, ''] : [cursor.slice(0, dot), cursor.slice(dot)];
  return Buffer.from(change(Buffer.from(position, 'base64url').toString())).toString('base64url') + rest;
}

/** A list position moved a second later (a page the API never issued). */
const movedPosition = (position: string) => position.replace(/^(\d+):/, (_all, at: string) => `${Number(at) + 1000}:`);

/**
 * Issue #39 §4: every page cursor is tamper-evident. A cursor the API did not issue (forged, or an
 * issued one edited) is a 400 invalid_request naming `cursor` on every list, on both engines; the
 * cursors it issued keep paging.
 */
describe('page cursors the API did not issue: 400 invalid_request (param cursor) on every list', () => {
  let t: TestGateway;
  let receiver: WebhookReceiver;
  let clientKey = '';
  let keyId = '';
  let webhookId = '';
  let usageRange = '';

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_INTERVAL_MS: '20' });
    const from = bucketStartOf(t.clock.now(), 'hour');
    ({ id: keyId, key: clientKey } = await t.createKey({ owner: 'pages@example.com' }));
    const other = await t.createKey({ owner: 'pages@example.com' });
    // Generations of two keys: two generation rows of the key, and two rows of usage by key.
    for (const key of [clientKey, clientKey, other.key]) expect((await t.api.client(key, localRequest())).status).toBe(200);
    for (const scope of ['keys:read', 'audit:read']) await createAdminTokenVia(t.api, [scope]);
    const endpoint = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['key.disabled'] });
    webhookId = endpoint.body.id;
    for (let i = 0; i < 2; i += 1) {
      t.clock.advanceMs(5);
      expect((await t.api.admin('post', `/admin/webhooks/${webhookId}/test`)).status).toBeLessThan(300);
    }
    await until(async () => (await t.api.admin('get', `/admin/webhooks/${webhookId}/deliveries`)).body.data.length === 2, 'two deliveries');
    usageRange = `from=${new Date(from).toISOString()}&to=${new Date(from + HOUR).toISOString()}`;
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  const lists: Array<[string, string, (path: string) => Promise<Response>]> = [
    ['listKeys', '/admin/keys?limit=1', (path) => t.api.admin('get', path)],
    ['listAdminTokens', '/admin/tokens?limit=1', (path) => t.api.admin('get', path)],
    ['listAuditEvents', '/admin/audit-events?limit=1', (path) => t.api.admin('get', path)],
    ['listWebhookDeliveries', '/admin/webhooks/{id}/deliveries?limit=1', (path) => t.api.admin('get', path.replace('{id}', webhookId))],
    ['listGenerations (client key)', '/generations?limit=1', (path) => t.api.send('get', path, { headers: bearer(clientKey) })],
    ['listAdminGenerations', '/admin/generations?limit=1', (path) => t.api.admin('get', path)],
    ['listGenerations (internal API)', '/api/v1/creative/generations?limit=1&key_id={key}', (path) => t.internal.service('get', path.replace('{key}', keyId))],
  ];

  it.each(lists)('%s: an issued cursor pages on; the same position moved, or one written by hand, is refused', async (_name, path, get) => {
    const first = await get(path);
    expect(first.status).toBe(200);
    const issued = first.body.next_cursor as string;
    expect(typeof issued).toBe('string');
    expect((await get(`${path}&cursor=${encodeURIComponent(issued)}`)).status).toBe(200);
    const idPrefix = (first.body.data[0].id as string).split('_')[0] as string;
    const forged = [tampered(issued, movedPosition), Buffer.from(`9999999999999:${idPrefix}_zzz`).toString('base64url')];
    for (const cursor of forged) {
      const res = await get(`${path}&cursor=${encodeURIComponent(cursor)}`);
      expect([res.status, res.body.error?.code, res.body.error?.param]).toEqual([400, 'invalid_request', 'cursor']);
    }
  });

  it('getUsageReport: sort values changed in an issued cursor are refused on both engines (not a 500, not a page)', async () => {
    const usage = (query: string) => t.api.admin('get', `/admin/usage?${usageRange}&group_by=key&order=credits_desc&limit=1${query}`);
    const first = await usage('');
    expect(first.status).toBe(200);
    const issued = first.body.next_cursor as string;
    expect((await usage(`&cursor=${encodeURIComponent(issued)}`)).status).toBe(200);
    const text = tampered(issued, (position) => {
      const parsed = JSON.parse(position) as { q: string; v: Array<string | number> };
      return JSON.stringify({ ...parsed, v: parsed.v.map((value) => (typeof value === 'number' ? 'not a number' : value)) });
    });
    const numbers = tampered(issued, (position) => {
      const parsed = JSON.parse(position) as { q: string; v: Array<string | number> };
      return JSON.stringify({ ...parsed, v: parsed.v.map((value) => (typeof value === 'number' ? value + 1 : value)) });
    });
    for (const cursor of [text, numbers]) {
      const res = await usage(`&cursor=${encodeURIComponent(cursor)}`);
      expect([res.status, res.body.error?.code, res.body.error?.param]).toEqual([400, 'invalid_request', 'cursor']);
    }
  });

  it('a cursor of one list is refused by another', async () => {
    const keys = await t.api.admin('get', '/admin/keys?limit=1');
    const res = await t.api.admin('get', `/admin/generations?limit=1&cursor=${encodeURIComponent(keys.body.next_cursor)}`);
    expect([res.status, res.body.error?.param]).toEqual([400, 'cursor']);
  });
});
