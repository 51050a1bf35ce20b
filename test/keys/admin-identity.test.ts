import { ALL_ADMIN_SCOPES } from '../../src/admin-tokens/admin-token.model';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

describe('GET /admin/whoami (getAdminIdentity): the caller reads its own scopes', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('the admin secret: root, every scope, no expiry', async () => {
    const res = await t.api.admin('get', '/admin/whoami');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ actor: 'root', kind: 'admin_secret', name: null, scopes: [...ALL_ADMIN_SCOPES], expires_at: null });
  });

  it('an admin token: its id, name, scopes and expiry, whatever scopes it holds (no scope needed)', async () => {
    const reader = await createAdminTokenVia(t.api, ['keys:read'], { name: 'console reader', expires_in_days: 10 });
    const res = await t.api.send('get', '/admin/whoami', { headers: bearer(reader.token) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ actor: reader.id, kind: 'admin_token', name: 'console reader', scopes: ['keys:read'] });
    expect(res.body.expires_at).toBe((await t.api.admin('get', `/admin/tokens/${reader.id}`)).body.expires_at);
    expect(res.body.expires_at).not.toBeNull();
    const auditor = await createAdminTokenVia(t.api, ['audit:read', 'webhooks:read']);
    expect((await t.api.send('get', '/admin/whoami', { headers: bearer(auditor.token) })).body.scopes).toEqual(['audit:read', 'webhooks:read']);
  });

  it('401 without credentials, with a client key, or with a revoked token; 400 for an unknown query parameter', async () => {
    expect((await t.api.send('get', '/admin/whoami')).body.error.code).toBe('invalid_admin_secret');
    const { key } = await t.createKey();
    expect((await t.api.send('get', '/admin/whoami', { headers: bearer(key) })).body.error.code).toBe('invalid_admin_secret');
    const revoked = await createAdminTokenVia(t.api, ['keys:read']);
    await t.api.admin('delete', `/admin/tokens/${revoked.id}`);
    const refused = await t.api.send('get', '/admin/whoami', { headers: bearer(revoked.token) });
    expect([refused.status, refused.body.error.code]).toEqual([401, 'admin_token_revoked']);
    expect((await t.api.admin('get', '/admin/whoami?scope=all')).status).toBe(400);
  });
});
