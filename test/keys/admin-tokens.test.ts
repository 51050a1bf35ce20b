import { createHash } from 'node:crypto';
import { adminTokenSecrets } from '../../src/admin-tokens/admin-token.model';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { ADMIN_SECRET, type TestGateway, startTestGateway } from '../helpers/test-gateway';

const validKey = { name: 'design', owner: 'design@example.com', credits_quota: 100, quota_period_days: 30, allowed_providers: ['local'] };

describe('scoped admin tokens', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  describe('POST /admin/tokens (createAdminToken)', () => {
    it('201 with Location and the secret once; only its SHA-256 is stored', async () => {
      const res = await t.api.admin('post', '/admin/tokens', { name: 'dashboard', scopes: ['keys:read', 'audit:read'], expires_in_days: 2 });
      expect(res.status).toBe(201);
      expect(res.headers.location).toBe(`/admin/tokens/${res.body.id}`);
      expect(res.body).toMatchObject({ name: 'dashboard', scopes: ['keys:read', 'audit:read'], status: 'active', created_by: 'root', revoked_at: null });
      expect(res.body.id).toMatch(/^adt_[0-9A-Za-z]{22}$/);
      expect(adminTokenSecrets.isWellFormed(res.body.token)).toBe(true);
      expect(res.body.hint).toBe(`${res.body.token.slice(0, 10)}...${res.body.token.slice(-4)}`);
      expect(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)).toBe(2 * 86_400_000);
      const row = await t.gateway.database.db.selectFrom('admin_tokens').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
      expect(row.token_hash).toBe(createHash('sha256').update(res.body.token).digest('hex'));
      expect(JSON.stringify(row)).not.toContain(res.body.token);
      const again = await t.api.admin('get', `/admin/tokens/${res.body.id}`);
      expect(again.body.token).toBeUndefined();
    });

    it.each([
      [{ name: 'x', scopes: ['keys:admin'] }, 'scopes[0]'],
      [{ name: 'x', scopes: [] }, 'scopes'],
      [{ name: 'x', scopes: ['keys:read', 'keys:read'] }, 'scopes'],
      [{ scopes: ['keys:read'] }, 'name'],
      [{ name: 'x', scopes: ['keys:read'], expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [{ name: 'x', scopes: ['keys:read'], expires_at: new Date(Date.now() + 3_600_000).toISOString(), expires_in_days: 1 }, 'expires_at'],
    ])('400 invalid_request for %j', async (body, param) => {
      const res = await t.api.admin('post', '/admin/tokens', body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    });

    it('a token with tokens:write grants only scopes it holds; what it creates names it as creator', async () => {
      const granter = await createAdminTokenVia(t.api, ['tokens:write', 'keys:read']);
      const refused = await t.api.send('post', '/admin/tokens', {
        headers: bearer(granter.token),
        body: { name: 'wider', scopes: ['keys:read', 'keys:write'] },
      });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: 'insufficient_scope', type: 'permission_error', scope: 'keys:write' });
      expect(refused.body.error.message).toContain('keys:write');
      const granted = await t.api.send('post', '/admin/tokens', { headers: bearer(granter.token), body: { name: 'narrow', scopes: ['keys:read'] } });
      expect(granted.status).toBe(201);
      expect(granted.body.created_by).toBe(granter.id);
    });
  });

  describe('lineage: a token never outlives the token that created it (issue #29 §6)', () => {
    const mint = (parent: string, body: Record<string, unknown>) =>
      t.api.send('post', '/admin/tokens', { headers: bearer(parent), body: { name: 'child', scopes: ['tokens:write', 'keys:read'], ...body } });
    const keysWith = async (token: string) => {
      const res = await t.api.send('get', '/admin/keys', { headers: bearer(token) });
      return [res.status, res.body.error?.code ?? 'ok'];
    };

    it("caps a child's expiry (none asked, or later) at its parent's; the whole line expires together", async () => {
      const parent = await createAdminTokenVia(t.api, ['tokens:write', 'keys:read'], { expires_at: new Date(t.clock.now() + 4_000).toISOString() });
      const parentExpiry = (await t.api.admin('get', `/admin/tokens/${parent.id}`)).body.expires_at;
      const child = await mint(parent.token, {});
      expect(child.status).toBe(201);
      expect(child.body.expires_at).toBe(parentExpiry);
      const grandchild = await mint(child.body.token, { expires_in_days: 36500 });
      expect(grandchild.body.expires_at).toBe(parentExpiry);
      // An earlier expiry than the parent's is kept as asked.
      const sooner = new Date(t.clock.now() + 2_000).toISOString();
      expect((await mint(parent.token, { expires_at: sooner })).body.expires_at).toBe(sooner);
      // Root's tokens are not bound: no expiry stays no expiry.
      expect((await t.api.admin('post', '/admin/tokens', { name: 'forever', scopes: ['keys:read'] })).body.expires_at).toBeNull();

      t.clock.advanceMs(5_000);
      for (const token of [parent.token, child.body.token, grandchild.body.token]) expect(await keysWith(token)).toEqual([401, 'admin_token_expired']);
    });

    it('revoking a token revokes its descendants, each with an audit event; other lines stay', async () => {
      const parent = await createAdminTokenVia(t.api, ['tokens:write', 'keys:read']);
      const child = (await mint(parent.token, {})).body;
      const grandchild = (await mint(child.token, { scopes: ['keys:read'] })).body;
      const sibling = await createAdminTokenVia(t.api, ['tokens:write', 'keys:read']);
      const nephew = (await mint(sibling.token, {})).body;
      for (const token of [child.token, grandchild.token]) expect(await keysWith(token)).toEqual([200, 'ok']);

      const revoked = await t.api.send('delete', `/admin/tokens/${parent.id}`, { headers: bearer(sibling.token) });
      expect(revoked.body.status).toBe('revoked');
      for (const token of [parent.token, child.token, grandchild.token]) expect(await keysWith(token)).toEqual([401, 'admin_token_revoked']);
      for (const token of [sibling.token, nephew.token]) expect(await keysWith(token)).toEqual([200, 'ok']);
      const events = await t.api.admin('get', `/admin/audit-events?action=admin_token.revoked&actor=${sibling.id}`);
      expect(events.body.data.map((e: { target: string }) => e.target).sort()).toEqual([parent.id, child.id, grandchild.id].sort());
      // Revoking again changes and records nothing.
      await t.api.send('delete', `/admin/tokens/${parent.id}`, { headers: bearer(sibling.token) });
      expect((await t.api.admin('get', `/admin/audit-events?action=admin_token.revoked&actor=${sibling.id}`)).body.data).toHaveLength(3);
    });

    it('a revoked or expired token mints nothing, even when the guard read it before the revocation', async () => {
      const parent = await createAdminTokenVia(t.api, ['tokens:write', 'keys:read']);
      // Revoked between the guard's read and the insert: the creation re-reads its creator in its transaction.
      await t.gateway.database.db.updateTable('admin_tokens').set({ revoked_at: t.clock.now() }).where('id', '=', parent.id).execute();
      const refused = await mint(parent.token, {});
      expect([refused.status, refused.body.error.code]).toEqual([401, 'admin_token_revoked']);
    });
  });

  describe('the AdminSecret scheme with scopes', () => {
    it('a token opens the operations of its scopes, and 403 insufficient_scope names the missing one elsewhere', async () => {
      const reader = await createAdminTokenVia(t.api, ['keys:read']);
      expect((await t.api.send('get', '/admin/keys', { headers: bearer(reader.token) })).status).toBe(200);
      for (const [method, path, body, scope] of [
        ['post', '/admin/keys', validKey, 'keys:write'],
        ['post', '/admin/keys/key_x/rotate', undefined, 'keys:write'],
        ['get', '/admin/audit-events', undefined, 'audit:read'],
        ['get', '/admin/tokens', undefined, 'tokens:write'],
        ['delete', `/admin/tokens/${reader.id}`, undefined, 'tokens:write'],
      ] as const) {
        const res = await t.api.send(method, path, { headers: bearer(reader.token), body });
        expect([path, res.status, res.body.error]).toEqual([path, 403, expect.objectContaining({ code: 'insufficient_scope', scope })]);
      }
      const writer = await createAdminTokenVia(t.api, ['keys:write']);
      const created = await t.api.send('post', '/admin/keys', { headers: bearer(writer.token), body: validKey });
      expect(created.status).toBe(201);
      expect((await t.api.send('get', `/admin/keys/${created.body.id}`, { headers: bearer(writer.token) })).body.error.code).toBe('insufficient_scope');
    });

    it('the admin secret holds every scope', async () => {
      for (const path of ['/admin/keys', '/admin/tokens', '/admin/audit-events']) expect((await t.api.admin('get', path)).status).toBe(200);
    });

    it('401 invalid_admin_token for a malformed or unknown token, admin_token_revoked, admin_token_expired', async () => {
      const unknown = adminTokenSecrets.generate();
      const malformed = `${unknown.slice(0, -1)}${unknown.endsWith('A') ? 'B' : 'A'}`;
      for (const token of [unknown, malformed, 'hyadm_short']) {
        const res = await t.api.send('get', '/admin/keys', { headers: bearer(token) });
        expect([token, res.status, res.body.error.code]).toEqual([token, 401, 'invalid_admin_token']);
      }
      const revoked = await createAdminTokenVia(t.api, ['keys:read']);
      expect((await t.api.admin('delete', `/admin/tokens/${revoked.id}`)).body.status).toBe('revoked');
      const refused = await t.api.send('get', '/admin/keys', { headers: bearer(revoked.token) });
      expect([refused.status, refused.body.error.code]).toEqual([401, 'admin_token_revoked']);

      const expiring = await createAdminTokenVia(t.api, ['keys:read'], { expires_in_days: 1 });
      expect((await t.api.send('get', '/admin/keys', { headers: bearer(expiring.token) })).status).toBe(200);
      t.clock.advanceDays(2);
      const expired = await t.api.send('get', '/admin/keys', { headers: bearer(expiring.token) });
      expect([expired.status, expired.body.error.code]).toEqual([401, 'admin_token_expired']);
      expect((await t.api.admin('get', `/admin/tokens/${expiring.id}`)).body.status).toBe('expired');
    });

    it('client keys and wrong secrets stay invalid_admin_secret on the token operations', async () => {
      const { key } = await t.createKey();
      const token = await createAdminTokenVia(t.api, ['tokens:write']);
      const operations = [
        ['post', '/admin/tokens', { name: 'x', scopes: ['keys:read'] }],
        ['get', '/admin/tokens', undefined],
        ['get', `/admin/tokens/${token.id}`, undefined],
        ['delete', `/admin/tokens/${token.id}`, undefined],
      ] as const;
      for (const [method, path, body] of operations) {
        for (const headers of [{}, bearer(key), bearer(`${ADMIN_SECRET}x`)]) {
          const res = await t.api.send(method, path, { headers, body });
          expect([method, path, res.status, res.body.error.code]).toEqual([method, path, 401, 'invalid_admin_secret']);
        }
      }
      expect((await t.api.admin('get', `/admin/tokens/${token.id}`)).body.revoked_at).toBeNull();
    });

    it("an Idempotency-Key is scoped to the token: root's stored response is not replayed to a token", async () => {
      const writer = await createAdminTokenVia(t.api, ['keys:write']);
      const headers = { 'Idempotency-Key': `shared-${Date.now()}` };
      const byRoot = await t.api.send('post', '/admin/keys', { headers: { ...headers, Authorization: `Bearer ${ADMIN_SECRET}` }, body: validKey });
      const byToken = await t.api.send('post', '/admin/keys', { headers: { ...headers, ...bearer(writer.token) }, body: validKey });
      expect(byToken.status).toBe(201);
      expect(byToken.headers['idempotent-replayed']).toBeUndefined();
      expect(byToken.body.id).not.toBe(byRoot.body.id);
    });
  });

  describe('GET /admin/tokens (listAdminTokens), GET /admin/tokens/{id} (getAdminToken), DELETE /admin/tokens/{id} (revokeAdminToken)', () => {
    it('lists newest first with a cursor and a status filter, never with secrets', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        t.clock.advanceMs(5);
        ids.push((await createAdminTokenVia(t.api, ['webhooks:read'])).id);
      }
      await t.api.admin('delete', `/admin/tokens/${ids[1]}`);
      const seen: Array<{ id: string; token?: string }> = [];
      let cursor: string | null = null;
      do {
        const page: { status: number; body: { data: Array<{ id: string; token?: string }>; next_cursor: string | null } } = await t.api.admin(
          'get',
          `/admin/tokens?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        );
        expect(page.status).toBe(200);
        seen.push(...page.body.data);
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(seen.map((token) => token.id).slice(0, 3)).toEqual([...ids].reverse());
      expect(seen.every((token) => token.token === undefined)).toBe(true);
      const revoked = await t.api.admin('get', '/admin/tokens?status=revoked');
      expect(revoked.body.data.map((token: { id: string }) => token.id)).toContain(ids[1]);
      expect(revoked.body.data.map((token: { id: string }) => token.id)).not.toContain(ids[0]);
      const active = await t.api.admin('get', '/admin/tokens?status=active');
      expect(active.body.data.map((token: { id: string }) => token.id)).not.toContain(ids[1]);
    });

    it('revokes idempotently and keeps the record', async () => {
      const { id } = await createAdminTokenVia(t.api, ['keys:read']);
      const first = await t.api.admin('delete', `/admin/tokens/${id}`);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ id, status: 'revoked' });
      const second = await t.api.admin('delete', `/admin/tokens/${id}`);
      expect(second.body.revoked_at).toBe(first.body.revoked_at);
      expect((await t.api.admin('get', `/admin/tokens/${id}`)).body.status).toBe('revoked');
    });

    it('a token revokes only tokens whose scopes it holds all of; root revokes any (issue #29 §6)', async () => {
      const tokenAdmin = await createAdminTokenVia(t.api, ['tokens:write']);
      const everything = await createAdminTokenVia(t.api, ['keys:read', 'keys:write', 'tokens:write', 'audit:read']);
      const refused = await t.api.send('delete', `/admin/tokens/${everything.id}`, { headers: bearer(tokenAdmin.token) });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: 'insufficient_scope', scope: 'keys:read' });
      expect(refused.body.error.message).toContain('cannot revoke');
      expect((await t.api.admin('get', `/admin/tokens/${everything.id}`)).body.status).toBe('active');
      // A token it could have made itself, and itself, it may revoke.
      const peer = await createAdminTokenVia(t.api, ['tokens:write']);
      expect((await t.api.send('delete', `/admin/tokens/${peer.id}`, { headers: bearer(tokenAdmin.token) })).body.status).toBe('revoked');
      expect((await t.api.send('delete', `/admin/tokens/${tokenAdmin.id}`, { headers: bearer(tokenAdmin.token) })).body.status).toBe('revoked');
      expect((await t.api.admin('delete', `/admin/tokens/${everything.id}`)).body.status).toBe('revoked');
    });

    it('404 admin_token_not_found and 400 for a malformed id or cursor', async () => {
      for (const method of ['get', 'delete'] as const) {
        const res = await t.api.admin(method, '/admin/tokens/adt_missing');
        expect([res.status, res.body.error.code, res.body.error.param]).toEqual([404, 'admin_token_not_found', 'id']);
        expect((await t.api.admin(method, '/admin/tokens/key_abc')).status).toBe(400);
      }
      expect((await t.api.admin('get', '/admin/tokens?cursor=garbage')).body.error.code).toBe('invalid_request');
    });
  });
});
