import { createHash } from 'node:crypto';
import { Sealer } from '../../src/shared/sealing';
import { WebhookSecrets } from '../../src/webhooks/secret-sealing';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';
import { WebhookReceiver } from '../helpers/webhook-receiver';

const OLD_KEY = '33'.repeat(32);
const NEW_KEY = '44'.repeat(32);
const keyId = (hex: string) => createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex').slice(0, 8);

describe('webhook signing secrets sealed at rest (CHANNEL_SEALING_KEY)', () => {
  it('bound to the endpoint: a sealed secret opens for its endpoint only, not as a channel credential', () => {
    const sealer = new Sealer([Buffer.from(OLD_KEY, 'hex')]);
    const secrets = new WebhookSecrets(sealer);
    const sealed = secrets.seal('whep_a', 'whsec_abc');
    expect(Sealer.isSealed(sealed)).toBe(true);
    expect(secrets.open('whep_a', sealed)).toBe('whsec_abc');
    expect(() => secrets.open('whep_b', sealed)).toThrow();
    expect(() => sealer.open('whep_a', sealed)).toThrow();
    // A value from before sealing is read as it is, and is due for sealing.
    expect(secrets.open('whep_a', 'whsec_clear')).toBe('whsec_clear');
    expect(secrets.resealed('whep_a', sealed)).toBeUndefined();
    expect(Sealer.isSealed(secrets.resealed('whep_a', 'whsec_clear') ?? '')).toBe(true);
  });

  describe('on a database shared by successive gateways', () => {
    let receiver: WebhookReceiver;
    let database: ThrowawayDatabase;
    let t: TestGateway | undefined;
    const env = (sealingKey: string) => ({
      DATABASE_URL: database.url,
      CHANNEL_SEALING_KEY: sealingKey,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '20',
    });
    const columns = async (gateway: TestGateway, id: string) =>
      gateway.gateway.database.db.selectFrom('webhook_endpoints').select(['secret', 'previous_secret']).where('id', '=', id).executeTakeFirstOrThrow();
    /** Sends a test event and waits for it; true when it verifies under `secret` with the standardwebhooks package. */
    async function verifiesWith(gateway: TestGateway, id: string, secret: string): Promise<boolean> {
      receiver.secrets.splice(0, receiver.secrets.length, secret);
      const queued = await gateway.api.admin('post', `/admin/webhooks/${id}/test`);
      expect(queued.status).toBe(202);
      await until(() => receiver.received.some((r) => r.id === queued.body.event_id), 'the test event');
      return receiver.received.find((r) => r.id === queued.body.event_id)?.event?.type === 'webhook.test';
    }

    beforeAll(async () => {
      receiver = await new WebhookReceiver().start();
      database = await createThrowawayDatabase();
    });
    afterEach(async () => {
      await t?.close();
      t = undefined;
    });
    afterAll(async () => {
      await receiver.close();
      await database.drop();
    });

    it('created and rotated secrets are stored sealed: no column holds a secret in clear', async () => {
      t = await startTestGateway(env(OLD_KEY));
      const created = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['key.disabled'] });
      const id = created.body.id as string;
      const first = await columns(t, id);
      expect(first.secret.startsWith(`v1.${keyId(OLD_KEY)}.`)).toBe(true);
      expect(first.previous_secret).toBeNull();
      const rotated = await t.api.admin('post', `/admin/webhooks/${id}/rotate-secret`, { overlap_seconds: 60 });
      const second = await columns(t, id);
      expect(second.previous_secret).toBe(first.secret);
      expect(Sealer.isSealed(second.secret)).toBe(true);
      const stored = JSON.stringify(await t.gateway.database.db.selectFrom('webhook_endpoints').selectAll().execute());
      for (const secret of [created.body.secret as string, rotated.body.secret as string]) {
        expect(stored).not.toContain(secret);
        expect(stored).not.toContain(secret.slice('whsec_'.length));
      }
      expect(stored).not.toContain('whsec_');
      expect(await verifiesWith(t, id, rotated.body.secret)).toBe(true);
      expect(await verifiesWith(t, id, created.body.secret)).toBe(true);
    });

    it('secrets stored in clear (before sealing) and secrets sealed with an older key are sealed with the newest at startup', async () => {
      t = await startTestGateway(env(OLD_KEY));
      const legacy = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['key.disabled'] });
      const older = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['key.disabled'] });
      // As a gateway from before sealing left it: both secrets in clear.
      await t.gateway.database.db
        .updateTable('webhook_endpoints')
        .set({
          secret: legacy.body.secret,
          previous_secret: 'whsec_cHJldmlvdXMtc2VjcmV0LWluLWNsZWFyLTAxMjM0NTY=',
          previous_secret_expires_at: t.clock.now() + 3_600_000,
        })
        .where('id', '=', legacy.body.id)
        .execute();
      await t.close();

      t = await startTestGateway(env(`${NEW_KEY},${OLD_KEY}`));
      for (const id of [legacy.body.id, older.body.id]) {
        const row = await columns(t, id);
        expect(row.secret.startsWith(`v1.${keyId(NEW_KEY)}.`)).toBe(true);
        if (row.previous_secret !== null) expect(row.previous_secret.startsWith(`v1.${keyId(NEW_KEY)}.`)).toBe(true);
      }
      expect(JSON.stringify(await t.gateway.database.db.selectFrom('webhook_endpoints').selectAll().execute())).not.toContain('whsec_');
      expect(await verifiesWith(t, legacy.body.id, legacy.body.secret)).toBe(true);
      expect(await verifiesWith(t, legacy.body.id, 'whsec_cHJldmlvdXMtc2VjcmV0LWluLWNsZWFyLTAxMjM0NTY=')).toBe(true);
      expect(await verifiesWith(t, older.body.id, older.body.secret)).toBe(true);
      await t.close();

      // The old key can go now.
      t = await startTestGateway(env(NEW_KEY));
      expect(await verifiesWith(t, older.body.id, older.body.secret)).toBe(true);
    });

    it('a secret sealed with a key no longer configured fails its deliveries (named in the attempt), never sends unsigned', async () => {
      t = await startTestGateway(env(OLD_KEY));
      const created = await t.api.admin('post', '/admin/webhooks', { url: receiver.url, event_types: ['key.disabled'] });
      await t.close();
      t = await startTestGateway(env(NEW_KEY));
      const before = receiver.received.length;
      await t.api.admin('post', `/admin/webhooks/${created.body.id}/test`);
      const failed = async () => (await t!.api.admin('get', `/admin/webhooks/${created.body.id}/deliveries`)).body.data[0];
      await until(async () => (await failed())?.attempts === 1, 'the failed attempt');
      expect(await failed()).toMatchObject({
        status: 'pending',
        last_status_code: null,
        last_error: 'its signing secret cannot be opened (sealing key not configured)',
      });
      expect(receiver.received.length).toBe(before);
      expect(t.logs.join('\n')).toContain(`not configured (key id ${keyId(OLD_KEY)})`);
    });
  });
});
