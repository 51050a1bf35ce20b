import os from 'node:os';
import { Webhook } from 'standardwebhooks';
import { retryDelayMs } from '../../src/webhooks/dispatcher';
import { emitChannelAutoDisabled } from '../../src/events/channel-events';
import { postJson } from '../../src/shared/outbound';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

const ALL_EVENTS = [
  'key.quota.threshold_reached',
  'key.quota.exhausted',
  'project.quota.threshold_reached',
  'project.quota.exhausted',
  'key.expiring',
  'key.expired',
  'key.disabled',
  'channel.auto_disabled',
];

describe('events and webhooks (createWebhookEndpoint, listWebhookEndpoints, getWebhookEndpoint, updateWebhookEndpoint, deleteWebhookEndpoint, rotateWebhookSecret, sendTestWebhook, listWebhookDeliveries)', () => {
  let t: TestGateway;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await startTestGateway({
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '20',
      WEBHOOK_EXPIRY_SCAN_INTERVAL_MS: '20',
      WEBHOOK_DISABLE_AFTER_HOURS: '1',
    });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  /** A fresh endpoint on the receiver (its secret registered for verification) and a fresh receiver log. */
  async function endpoint(eventTypes = ALL_EVENTS, url = receiver.url): Promise<{ id: string; secret: string }> {
    const res = await t.api.admin('post', '/admin/webhooks', { url, event_types: eventTypes });
    expect(res.status).toBe(201);
    receiver.secrets.push(res.body.secret);
    return { id: res.body.id, secret: res.body.secret };
  }
  const deliveries = async (id: string) => (await t.api.admin('get', `/admin/webhooks/${id}/deliveries`)).body.data as Array<Record<string, unknown>>;
  const byKey = (type: string, keyId: string) => receiver.verified(type).filter((r) => r.event?.data.key_id === keyId);
  afterEach(async () => {
    // Endpoints and scripted answers of one test do not reach into the next.
    receiver.clearAnswers();
    for (const e of (await t.api.admin('get', '/admin/webhooks')).body.data) await t.api.admin('delete', `/admin/webhooks/${e.id}`);
  });

  describe('admin operations', () => {
    it('create shows the whsec_ secret once, with Location; get, list, update and delete', async () => {
      const created = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['key.disabled'], description: 'ops' });
      expect(created.status).toBe(201);
      expect(created.headers.location).toBe(`/admin/webhooks/${created.body.id}`);
      expect(created.body).toMatchObject({ url: receiver.url, event_types: ['key.disabled'], description: 'ops', status: 'enabled', disabled_reason: null });
      expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{40,}$/);
      const got = await t.api.admin('get', `/admin/webhooks/${created.body.id}`);
      expect(got.body).not.toHaveProperty('secret');
      expect((await t.api.admin('get', '/admin/webhooks')).body.data.map((e: { id: string }) => e.id)).toContain(created.body.id);
      const updated = await t.api.admin('patch', `/admin/webhooks/${created.body.id}`, { event_types: ['key.expired'], status: 'disabled' });
      expect(updated.body).toMatchObject({ event_types: ['key.expired'], status: 'disabled', disabled_reason: 'Disabled by an administrator.' });
      const reenabled = await t.api.admin('patch', `/admin/webhooks/${created.body.id}`, { status: 'enabled' });
      expect(reenabled.body).toMatchObject({ status: 'enabled', disabled_reason: null, disabled_at: null });
      expect((await t.api.admin('delete', `/admin/webhooks/${created.body.id}`)).status).toBe(204);
      expect((await t.api.admin('get', `/admin/webhooks/${created.body.id}`)).body.error.code).toBe('webhook_endpoint_not_found');
    });

    it('every change is in the audit log (actor, action, changed fields), and no secret is in any audit row', async () => {
      const { token, id: tokenId } = await createAdminTokenVia(t.api, ['webhooks:write']);
      const created = await t.api.send('post', '/admin/webhooks', { headers: bearer(token), body: { url: receiver.url, event_types: ['key.disabled'] } });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      t.clock.advanceMs(5);
      await t.api.admin('patch', `/admin/webhooks/${id}`, { description: 'paged', status: 'disabled' });
      t.clock.advanceMs(5);
      await t.api.admin('patch', `/admin/webhooks/${id}`, { description: 'paged' });
      t.clock.advanceMs(5);
      const rotated = await t.api.admin('post', `/admin/webhooks/${id}/rotate-secret`, { overlap_seconds: 60 });
      t.clock.advanceMs(5);
      const test = await t.api.admin('post', `/admin/webhooks/${id}/test`);
      t.clock.advanceMs(5);
      expect((await t.api.admin('delete', `/admin/webhooks/${id}`)).status).toBe(204);

      const events = (await t.api.admin('get', `/admin/audit-events?target=${id}`)).body.data as Array<Record<string, unknown>>;
      expect(events.map((e) => [e.actor, e.action])).toEqual([
        ['root', 'webhook_endpoint.deleted'],
        ['root', 'webhook_endpoint.test_sent'],
        ['root', 'webhook_endpoint.secret_rotated'],
        ['root', 'webhook_endpoint.updated'],
        [tokenId, 'webhook_endpoint.created'],
      ]);
      const [deleted, tested, rotation, update, creation] = events;
      expect(creation).toMatchObject({ before: null, after: { id, url: receiver.url, event_types: ['key.disabled'], secret: '[redacted]' } });
      expect(update).toMatchObject({
        before: { description: '', status: 'enabled', disabled_reason: null, disabled_at: null },
        after: { description: 'paged', status: 'disabled', disabled_reason: 'Disabled by an administrator.' },
      });
      expect(rotation).toMatchObject({
        before: { overlap_ends_at: null },
        after: { overlap_ends_at: rotated.body.previous_secret_expires_at, secret: '[redacted]' },
      });
      expect(rotated.body.previous_secret_expires_at).toEqual(expect.stringMatching(/^20\d\d-/));
      expect(tested).toMatchObject({ before: null, after: { event_id: test.body.event_id } });
      expect(deleted).toMatchObject({ before: { id, description: 'paged' }, after: null });
      const stored = JSON.stringify(await t.gateway.database.db.selectFrom('audit_events').selectAll().execute());
      for (const secret of [created.body.secret, rotated.body.secret]) {
        expect(secret).toMatch(/^whsec_/);
        expect(stored).not.toContain(secret);
        expect(stored).not.toContain(secret.slice('whsec_'.length));
      }
    });

    it('a change that fails is not recorded; 403 insufficient_scope without webhooks:write', async () => {
      const { token } = await createAdminTokenVia(t.api, ['webhooks:read']);
      const refused = await t.api.send('post', '/admin/webhooks', { headers: bearer(token), body: { url: receiver.url, event_types: ['key.disabled'] } });
      expect([refused.status, refused.body.error.code, refused.body.error.scope]).toEqual([403, 'insufficient_scope', 'webhooks:write']);
      expect((await t.api.admin('patch', '/admin/webhooks/whep_missing', { description: 'x' })).status).toBe(404);
      expect((await t.api.admin('get', '/admin/audit-events?target=whep_missing')).body.data).toEqual([]);
    });

    it('listWebhookDeliveries pages newest first with limit and cursor (also filtered by status); 400 for a foreign cursor', async () => {
      const { id } = await endpoint(['key.disabled']);
      const events: string[] = [];
      for (let i = 0; i < 5; i += 1) {
        // Two deliveries share a created_at: the id orders them, and no page skips or repeats one.
        if (i !== 3) t.clock.advanceMs(5);
        events.push((await t.api.admin('post', `/admin/webhooks/${id}/test`)).body.event_id);
      }
      await until(async () => (await deliveries(id)).filter((d) => d.status === 'succeeded').length === 5, 'five deliveries');
      for (const status of [undefined, 'succeeded']) {
        const seen: Array<Record<string, unknown>> = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const query: string = `limit=2${status ? `&status=${status}` : ''}${cursor ? `&cursor=${cursor}` : ''}`;
          const page = await t.api.admin('get', `/admin/webhooks/${id}/deliveries?${query}`);
          expect(page.status).toBe(200);
          expect(page.body.data.length).toBeLessThanOrEqual(2);
          seen.push(...page.body.data);
          cursor = page.body.next_cursor;
          pages += 1;
        } while (cursor);
        expect(pages).toBe(3);
        expect(seen.map((d) => d.event_id).sort()).toEqual([...events].sort());
        const order = seen.map((d) => [d.created_at, d.id] as [string, string]);
        expect(order).toEqual([...order].sort((a, b) => (a[0] === b[0] ? (a[1] < b[1] ? 1 : -1) : a[0] < b[0] ? 1 : -1)));
      }
      expect((await t.api.admin('get', `/admin/webhooks/${id}/deliveries?status=failed&limit=2`)).body).toEqual({ data: [], next_cursor: null });
      const keysPage = await t.api.admin('get', '/admin/keys?limit=1');
      for (const cursor of ['garbage', keysPage.body.next_cursor ?? Buffer.from('1:key_x').toString('base64url')]) {
        const res = await t.api.admin('get', `/admin/webhooks/${id}/deliveries?cursor=${cursor}`);
        expect([res.status, res.body.error.code, res.body.error.param]).toEqual([400, 'invalid_request', 'cursor']);
      }
    });

    it('404 webhook_endpoint_not_found on every operation with an id', async () => {
      const id = 'whep_missing';
      for (const [method, path, body] of [
        ['get', `/admin/webhooks/${id}`, undefined],
        ['patch', `/admin/webhooks/${id}`, { description: 'x' }],
        ['delete', `/admin/webhooks/${id}`, undefined],
        ['post', `/admin/webhooks/${id}/rotate-secret`, {}],
        ['post', `/admin/webhooks/${id}/test`, undefined],
        ['get', `/admin/webhooks/${id}/deliveries`, undefined],
      ] as const) {
        const res = await t.api.admin(method, path, body);
        expect([path, method, res.status, res.body.error.code]).toEqual([path, method, 404, 'webhook_endpoint_not_found']);
      }
    });

    it('401 invalid_admin_secret on every operation, also with a client key', async () => {
      const { key } = await t.createKey();
      for (const [method, path] of [
        ['post', '/admin/webhooks'],
        ['get', '/admin/webhooks'],
        ['get', '/admin/webhooks/whep_x'],
        ['patch', '/admin/webhooks/whep_x'],
        ['delete', '/admin/webhooks/whep_x'],
        ['post', '/admin/webhooks/whep_x/rotate-secret'],
        ['post', '/admin/webhooks/whep_x/test'],
        ['get', '/admin/webhooks/whep_x/deliveries'],
      ] as const) {
        for (const headers of [{}, { Authorization: `Bearer ${key}` }] as Array<Record<string, string>>) {
          const res = await t.api.send(method, path, {
            headers,
            body: method === 'get' || method === 'delete' ? undefined : { url: receiver.url, event_types: ['key.disabled'] },
          });
          expect([path, res.status, res.body.error.code]).toEqual([path, 401, 'invalid_admin_secret']);
        }
      }
    });

    it.each([
      [{ url: 'ftp://example.com/x', event_types: ['key.disabled'] }, 'url'],
      [{ url: 'https://user:pw@example.com/x', event_types: ['key.disabled'] }, 'url'],
      [{ url: 'not a url at all', event_types: ['key.disabled'] }, 'url'],
      [{ url: 'https://example.com/x', event_types: ['key.nope'] }, 'event_types'],
      [{ url: 'https://example.com/x', event_types: [] }, 'event_types'],
    ])('400 invalid_request for %j', async (body, param) => {
      const res = await t.api.admin('post', '/admin/webhooks', body);
      expect(res.status).toBe(400);
      expect(res.body.error.param).toContain(param);
    });
  });

  describe('delivery (signatures verified with the standardwebhooks package)', () => {
    it('sendTestWebhook: a webhook.test signed per Standard Webhooks; its delivery listed with the attempt', async () => {
      const { id } = await endpoint(['key.disabled']);
      const queued = await t.api.admin('post', `/admin/webhooks/${id}/test`);
      expect(queued.status).toBe(202);
      await until(() => receiver.verified('webhook.test').some((r) => r.id === queued.body.event_id), 'the test event');
      const got = receiver.received.find((r) => r.id === queued.body.event_id);
      expect(got?.event?.data).toMatchObject({ endpoint_id: id });
      expect(got?.signature).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
      await until(async () => (await deliveries(id))[0]?.status === 'succeeded', 'the delivery to be recorded');
      const [delivery] = await deliveries(id);
      expect(delivery).toMatchObject({ event_id: queued.body.event_id, event_type: 'webhook.test', attempts: 1, last_status_code: 200 });
      expect(delivery?.attempt_log).toEqual([expect.objectContaining({ attempt: 1, status_code: 200, error: null })]);
    });

    it('quota thresholds: threshold_reached once per threshold, exhausted once per period', async () => {
      await endpoint();
      const { id, key } = await t.createKey({ credits_quota: 10, alert_thresholds: [50, 100] });
      for (let i = 0; i < 4; i++) expect((await t.api.client(key, localRequest())).status).toBe(200);
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
      await until(() => byKey('key.quota.threshold_reached', id).length === 1, 'the 50% event');
      expect(byKey('key.quota.threshold_reached', id)[0]?.event?.data).toMatchObject({ key_id: id, threshold: 50, credits_used: 6, credits_quota: 10 });
      for (let i = 0; i < 4; i++) expect((await t.api.client(key, localRequest())).status).toBe(200);
      expect((await t.api.client(key, localRequest())).status).toBe(402);
      expect((await t.api.client(key, localRequest())).status).toBe(402);
      await until(() => byKey('key.quota.exhausted', id).length === 1 && byKey('key.quota.threshold_reached', id).length === 2, 'the 100% events');
      await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['webhook.test'] });
      expect(byKey('key.quota.threshold_reached', id).map((r) => r.event?.data.threshold)).toEqual([50, 100]);
      expect(byKey('key.quota.exhausted', id)).toHaveLength(1);
    });

    it('a refusal for lack of credits raises exhausted (once) even when usage never reaches the quota', async () => {
      await endpoint(['key.quota.exhausted']);
      const { id, key } = await t.createKey({ credits_quota: 3, alert_thresholds: [] });
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(200);
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(402);
      expect((await t.api.client(key, localRequest({ n: 2 }))).status).toBe(402);
      await until(() => byKey('key.quota.exhausted', id).length === 1, 'exhausted');
      expect(byKey('key.quota.exhausted', id)[0]?.event?.data).toMatchObject({ credits_used: null, credits_quota: 3 });
    });

    it("a project's book raises its own events: threshold_reached at 80% and 100%, exhausted once per period (a later refusal adds none)", async () => {
      await endpoint(['project.quota.threshold_reached', 'project.quota.exhausted']);
      const project = await t.api.admin('post', '/admin/projects', { name: 'events', owner: 'o', credits_quota: 10, quota_period_days: 30 });
      expect(project.status).toBe(201);
      const projectId = project.body.id as string;
      const byProject = (type: string) => receiver.verified(type).filter((r) => r.event?.data.project_id === projectId);
      // Two keys share the project's book; neither key's own quota comes near its end.
      const [a, b] = [await t.createKey({ project_id: projectId, alert_thresholds: [] }), await t.createKey({ project_id: projectId, alert_thresholds: [] })];
      for (const key of [a, b, a, b]) expect((await t.api.client(key.key, localRequest({ n: 2 }))).status).toBe(200);
      await until(() => byProject('project.quota.threshold_reached').length === 1, 'the 80% event');
      expect(byProject('project.quota.threshold_reached')[0]?.event?.data).toEqual({
        project_id: projectId,
        threshold: 80,
        credits_used: 8,
        credits_quota: 10,
        period_started_at: project.body.period_started_at,
      });
      expect((await t.api.client(b.key, localRequest({ n: 2 }))).status).toBe(200);
      const refused = await t.api.client(a.key, localRequest());
      expect([refused.status, refused.body.error.code]).toEqual([402, 'project_quota_exceeded']);
      await until(() => byProject('project.quota.exhausted').length === 1 && byProject('project.quota.threshold_reached').length === 2, 'the 100% events');
      await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['webhook.test'] });
      expect(byProject('project.quota.threshold_reached').map((r) => r.event?.data.threshold)).toEqual([80, 100]);
      expect(byProject('project.quota.exhausted')[0]?.event?.data).toMatchObject({ project_id: projectId, credits_used: 10, credits_quota: 10 });
      // The keys' own books raised nothing: the project's events are its own.
      expect(receiver.verified('key.quota.exhausted').filter((r) => [a.id, b.id].includes(r.event?.data.key_id as string))).toEqual([]);
    });

    it('key.disabled on disableKey and on updateKey status disabled', async () => {
      await endpoint(['key.disabled']);
      const a = await t.createKey();
      const b = await t.createKey();
      await t.api.admin('delete', `/admin/keys/${a.id}`);
      await t.api.admin('patch', `/admin/keys/${b.id}`, { status: 'disabled' });
      await until(() => byKey('key.disabled', a.id).length === 1 && byKey('key.disabled', b.id).length === 1, 'two key.disabled');
      await t.api.admin('delete', `/admin/keys/${a.id}`);
      expect(byKey('key.disabled', a.id)).toHaveLength(1);
    });

    it("channel.auto_disabled through the emitter API, committed or rolled back with the caller's transaction", async () => {
      await endpoint(['channel.auto_disabled']);
      const db = t.gateway.database.db;
      await expect(
        db.transaction().execute(async (trx) => {
          await emitChannelAutoDisabled(trx, { channelId: 'ch_rolled_back', provider: 'jimeng', reason: 'HTTP 401' }, t.clock.now());
          throw new Error('the state change failed');
        }),
      ).rejects.toThrow('the state change failed');
      await db
        .transaction()
        .execute((trx) => emitChannelAutoDisabled(trx, { channelId: 'ch_1', provider: 'jimeng', reason: 'HTTP 401', statusCode: 401 }, t.clock.now()));
      await until(() => receiver.verified('channel.auto_disabled').length === 1, 'channel.auto_disabled');
      expect(receiver.verified('channel.auto_disabled')[0]?.event?.data).toEqual({
        channel_id: 'ch_1',
        provider: 'jimeng',
        reason: 'HTTP 401',
        status_code: 401,
      });
      expect(await db.selectFrom('events').select('id').where('payload', 'like', '%ch_rolled_back%').execute()).toEqual([]);
    });

    it('key.expiring (WEBHOOK_KEY_EXPIRING_DAYS ahead) and key.expired, once each', async () => {
      await endpoint(['key.expiring', 'key.expired']);
      const { id } = await t.createKey({ expires_in_days: 3 });
      await until(() => byKey('key.expiring', id).length === 1, 'key.expiring');
      t.clock.advanceDays(4);
      await until(() => byKey('key.expired', id).length === 1, 'key.expired');
      expect(byKey('key.expiring', id)).toHaveLength(1);
    });

    it('retries a failed delivery with the same webhook-id, on the Standard Webhooks schedule', async () => {
      const { id } = await endpoint(['key.disabled']);
      receiver.answer(503);
      const key = await t.createKey();
      await t.api.admin('delete', `/admin/keys/${key.id}`);
      await until(async () => (await deliveries(id))[0]?.attempts === 1, 'the failed first attempt');
      const [failed] = await deliveries(id);
      expect(failed).toMatchObject({ status: 'pending', last_status_code: 503 });
      // Second attempt 5 s (+-20 %) later.
      const firstAttempt = (failed?.attempt_log as Array<{ attempted_at: string; duration_ms: number }>)[0]!;
      const delay = Date.parse(failed?.next_attempt_at as string) - Date.parse(firstAttempt.attempted_at) - firstAttempt.duration_ms;
      expect(delay).toBeGreaterThanOrEqual(4000);
      expect(delay).toBeLessThanOrEqual(6100);
      expect((await t.api.admin('get', `/admin/webhooks/${id}`)).body.failing_since).not.toBeNull();
      t.clock.advanceMs(7000);
      await until(async () => (await deliveries(id))[0]?.status === 'succeeded', 'the retry');
      const attempts = byKey('key.disabled', key.id);
      expect(attempts).toHaveLength(2);
      expect(attempts[0]?.id).toBe(attempts[1]?.id);
      expect((await t.api.admin('get', `/admin/webhooks/${id}`)).body.failing_since).toBeNull();
    });

    it('the retry schedule: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h with jitter, then give up', () => {
      expect(Array.from({ length: 11 }, (_, i) => retryDelayMs(i, () => 0.5))).toEqual([
        0,
        5_000,
        300_000,
        1_800_000,
        7_200_000,
        18_000_000,
        36_000_000,
        50_400_000,
        72_000_000,
        86_400_000,
        undefined,
      ]);
      expect(retryDelayMs(1, () => 0)).toBe(4_000);
      expect(retryDelayMs(1, () => 1)).toBe(6_000);
    });

    it('410 Gone disables the endpoint, and an admin sees why', async () => {
      const { id } = await endpoint(['key.disabled']);
      receiver.answer(410);
      const key = await t.createKey();
      await t.api.admin('delete', `/admin/keys/${key.id}`);
      await until(async () => (await t.api.admin('get', `/admin/webhooks/${id}`)).body.status === 'disabled', 'the endpoint disabled');
      expect((await t.api.admin('get', `/admin/webhooks/${id}`)).body.disabled_reason).toBe('The endpoint answered 410 Gone.');
      expect((await deliveries(id))[0]).toMatchObject({ status: 'failed', last_status_code: 410 });
    });

    it('failing for longer than WEBHOOK_DISABLE_AFTER_HOURS disables the endpoint; a redirect is a failure, not followed', async () => {
      const { id } = await endpoint(['key.disabled']);
      receiver.answer(302, 500, 500, 500, 500);
      const before = receiver.received.length;
      const key = await t.createKey();
      await t.api.admin('delete', `/admin/keys/${key.id}`);
      await until(async () => (await deliveries(id))[0]?.attempts === 1, 'the first attempt');
      expect((await deliveries(id))[0]).toMatchObject({ last_status_code: 302, status: 'pending' });
      expect(receiver.received.slice(before).map((r) => r.id)).toHaveLength(1);
      for (let attempts = 1; (await t.api.admin('get', `/admin/webhooks/${id}`)).body.status === 'enabled';) {
        expect(attempts).toBeLessThan(5);
        t.clock.advanceMs(3 * 3_600_000);
        await until(async () => (await deliveries(id))[0]?.attempts === attempts + 1, 'the next attempt');
        attempts++;
      }
      expect((await t.api.admin('get', `/admin/webhooks/${id}`)).body.disabled_reason).toMatch(/^Every delivery failed since .* \(last: HTTP 500\)\.$/);
    });

    it('rotateWebhookSecret: old and new both sign during the overlap, only the new one after it', async () => {
      const { id, secret: oldSecret } = await endpoint(['key.disabled']);
      const rotated = await t.api.admin('post', `/admin/webhooks/${id}/rotate-secret`, { overlap_seconds: 3600 });
      expect(rotated.status).toBe(200);
      expect(rotated.body.secret).not.toBe(oldSecret);
      expect(rotated.body.previous_secret_expires_at).not.toBeNull();
      const during = await t.api.admin('post', `/admin/webhooks/${id}/test`);
      await until(() => receiver.received.some((r) => r.id === during.body.event_id), 'the test event');
      const signed = receiver.received.find((r) => r.id === during.body.event_id)!;
      const headers = { 'webhook-id': signed.id, 'webhook-timestamp': signed.timestamp, 'webhook-signature': signed.signature };
      expect(signed.signature.split(' ')).toHaveLength(2);
      expect(() => new Webhook(oldSecret).verify(signed.body, headers)).not.toThrow();
      expect(() => new Webhook(rotated.body.secret).verify(signed.body, headers)).not.toThrow();
      t.clock.advanceMs(3_601_000);
      const after = await t.api.admin('post', `/admin/webhooks/${id}/test`);
      await until(() => receiver.received.some((r) => r.id === after.body.event_id), 'the second test event');
      const later = receiver.received.find((r) => r.id === after.body.event_id)!;
      const laterHeaders = { 'webhook-id': later.id, 'webhook-timestamp': later.timestamp, 'webhook-signature': later.signature };
      expect(() => new Webhook(rotated.body.secret).verify(later.body, laterHeaders)).not.toThrow();
      expect(() => new Webhook(oldSecret).verify(later.body, laterHeaders)).toThrow();
    });
  });
});

describe('webhook URL safety (WEBHOOK_ALLOW_PRIVATE_NETWORKS unset)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it.each([
    'http://127.0.0.1:9/x',
    'http://localhost/x',
    'http://localhost./x',
    'http://10.1.2.3/x',
    'http://169.254.169.254/latest/meta-data',
    'http://[::1]/x',
    'http://[fd00:ec2::254]/x',
    'http://192.168.1.1/x',
  ])('400 for %s', async (url) => {
    const res = await t.api.admin('post', '/admin/webhooks', { url, event_types: ['key.disabled'] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'url' });
  });

  it('a delivery to a name that resolves to a local address is refused at connect time', async () => {
    // This machine's own name resolves to a loopback address (the check runs on the resolved address).
    const result = await postJson(`http://${os.hostname()}:9/x`, {}, '{}', { timeoutMs: 2000, allowPrivate: false });
    expect(result.statusCode).toBeUndefined();
    expect(result.error).toMatch(/blocked address|loopback/);
  });

  it('gives up on an endpoint that does not answer within the timeout', async () => {
    const silent = await new WebhookReceiver().start();
    silent.answer('hold');
    const result = await postJson(silent.url, {}, '{}', { timeoutMs: 200, allowPrivate: true });
    expect(result.error).toBe('no answer within 0.2 s');
    await silent.close();
  });
});
