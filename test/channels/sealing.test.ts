import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CredentialSealer } from '../../src/channels/channel-sealing';
import { ConfigError, loadConfig } from '../../src/config/config';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { createThrowawayDatabase, type ThrowawayDatabase } from '../helpers/test-database';
import { startTestGateway } from '../helpers/test-gateway';

const OLD_KEY = '11'.repeat(32);
const NEW_KEY = '22'.repeat(32);
const API_KEY = 'ark-secret-to-be-resealed-0001';

describe('channel credential sealing', () => {
  it('AES-256-GCM bound to the channel id; older keys still open; a missing key is named, not the secret', () => {
    const old = new CredentialSealer([Buffer.from(OLD_KEY, 'hex')]);
    const sealed = old.seal('chn_a', 'the secret');
    expect(sealed).not.toContain('the secret');
    expect(old.open('chn_a', sealed)).toBe('the secret');
    expect(() => old.open('chn_b', sealed)).toThrow();
    const rotated = new CredentialSealer([Buffer.from(NEW_KEY, 'hex'), Buffer.from(OLD_KEY, 'hex')]);
    expect(rotated.open('chn_a', sealed)).toBe('the secret');
    expect(rotated.isStale(sealed)).toBe(true);
    expect(rotated.isStale(rotated.seal('chn_a', 'x'))).toBe(false);
    const newOnly = new CredentialSealer([Buffer.from(NEW_KEY, 'hex')]);
    expect(() => newOnly.open('chn_a', sealed)).toThrow(/not configured \(key id [0-9a-f]{8}\)/);
  });

  it('CHANNEL_SEALING_KEY: validated, required in production, generated once outside it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-sealing-'));
    const base = { DATABASE_URL: path.join(dir, 'gw.db') };
    expect(() => loadConfig({ ...base, CHANNEL_SEALING_KEY: 'short' }, () => undefined)).toThrow(ConfigError);
    expect(loadConfig({ ...base, CHANNEL_SEALING_KEY: `${NEW_KEY},${OLD_KEY}` }, () => undefined).channels.sealingKeys).toHaveLength(2);
    expect(() =>
      loadConfig(
        {
          ...base,
          NODE_ENV: 'production',
          ADMIN_SECRET: 'a-long-enough-secret',
          CF_ACCESS_CLIENT_ID: 'svc',
          CF_ACCESS_CLIENT_SECRET: 'a-long-enough-secret',
          IMAGE_URL_SIGNING_KEY: 'k'.repeat(32),
        },
        () => undefined,
      ),
    ).toThrow(/CHANNEL_SEALING_KEY is required/);
    const first = loadConfig(base, () => undefined).channels.sealingKeys;
    expect(fs.statSync(path.join(dir, 'channel-sealing-key')).mode & 0o777).toBe(0o600);
    expect(loadConfig(base, () => undefined).channels.sealingKeys).toEqual(first);
  });

  describe('rotation on a shared database', () => {
    let ark: FakeImagesApi;
    let database: ThrowawayDatabase;
    beforeAll(async () => {
      ark = await startFakeImagesApi({ apiKey: API_KEY, flavour: 'ark' });
      database = await createThrowawayDatabase();
    });
    afterAll(async () => {
      await ark.close();
      await database.drop();
    });

    it('a gateway with CHANNEL_SEALING_KEY=new,old re-seals on read; then the old key can go', async () => {
      const before = await startTestGateway({ DATABASE_URL: database.url, CHANNEL_SEALING_KEY: OLD_KEY });
      const channel = await before.api.admin('post', '/admin/channels', {
        name: 'ark',
        provider: 'jimeng',
        transport: 'ark',
        base_url: ark.url,
        models: [{ model: 'jimeng-4.5' }],
        credentials: { api_key: API_KEY },
      });
      const sealedColumn = async (gateway: typeof before) =>
        (await gateway.gateway.database.db.selectFrom('channels').select('credentials_sealed').where('id', '=', channel.body.id).executeTakeFirstOrThrow())
          .credentials_sealed;
      const oldSealed = await sealedColumn(before);
      await before.close();

      const rotating = await startTestGateway({ DATABASE_URL: database.url, CHANNEL_SEALING_KEY: `${NEW_KEY},${OLD_KEY}` });
      const { key } = await rotating.createKey({ allowed_providers: ['jimeng'] });
      expect((await rotating.api.client(key, { prompt: 'through the old key', model: 'jimeng-4.5' })).status).toBe(200);
      let resealed = await sealedColumn(rotating);
      for (let i = 0; i < 100 && resealed === oldSealed; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        resealed = await sealedColumn(rotating);
      }
      expect(resealed).not.toBe(oldSealed);
      expect(resealed).not.toContain(API_KEY);
      await rotating.close();

      const after = await startTestGateway({ DATABASE_URL: database.url, CHANNEL_SEALING_KEY: NEW_KEY });
      const { key: key2 } = await after.createKey({ allowed_providers: ['jimeng'] });
      expect((await after.api.client(key2, { prompt: 'new key only', model: 'jimeng-4.5' })).status).toBe(200);
      expect(ark.requests).toHaveLength(2);
      for (const logs of [before.logs, rotating.logs, after.logs]) expect(logs.join('\n')).not.toContain(API_KEY);
      await after.close();
    });
  });
});
