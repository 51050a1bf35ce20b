import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { cliRunner } from './cli-harness';

describe('admin CLI: tokens and audit (createAdminToken, listAdminTokens, getAdminToken, revokeAdminToken, listAuditEvents)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());
  const { cli, json, usageError, help } = cliRunner(() => t);

  it.each([[['tokens', '--help']], [['tokens', 'create', '-h']], [['audit', 'list', '--help']]])('%j prints help and exits 0', async (args) => {
    await help(args);
  });

  it('--help documents ADMIN_TOKEN', async () => {
    expect(await help(['--help'])).toMatch(/ADMIN_TOKEN\s+a scoped admin token \(hyadm_\.\.\./);
  });

  it.each([
    [['tokens', 'create', '--name', 'x'], /required option '--scopes <list>' not specified/],
    [['tokens', 'create', '--name', 'x', '--scopes', 'keys:read', '--expires-in-days', '1', '--expires-at', '2099-01-01T00:00:00Z'], /not both/],
    [['tokens', 'revoke'], /missing required argument 'id'/],
    [['audit', 'list', '--created-after', 'yesterday'], /'yesterday' is invalid/],
    [['audit', 'list', '--limit', 'ten'], /'ten' is invalid/],
  ])('usage error %j exits 2', async (args, message) => {
    await usageError(args, message);
  });

  it('create, list, get, use as ADMIN_TOKEN (token wins over ADMIN_SECRET), revoke; the audit trail shows it', async () => {
    const created = await json(['tokens', 'create', '--name', 'reader', '--scopes', 'keys:read,audit:read', '--expires-in-days', '7']);
    expect(created).toMatchObject({ name: 'reader', scopes: ['keys:read', 'audit:read'], status: 'active', created_by: 'root' });
    expect(created.token).toMatch(/^hyadm_/);

    expect((await json(['tokens', 'list', '--status', 'active'])).data.map((x: { id: string }) => x.id)).toContain(created.id);
    expect(await json(['tokens', 'get', created.id])).not.toHaveProperty('token');

    // The token works in place of the admin secret, and wins when both are set.
    const asToken = { env: { ADMIN_TOKEN: created.token, ADMIN_SECRET: 'not-the-admin-secret' } };
    expect((await cli(['keys', 'list'], asToken)).code).toBe(0);
    const outOfScope = await cli(['tokens', 'create', '--name', 'y', '--scopes', 'keys:read'], asToken);
    expect(outOfScope).toMatchObject({ code: 1, stdout: '' });
    expect(outOfScope.stderr).toMatch(/^error: 403 /);

    const audit = await json(['audit', 'list', '--target', created.id, '--action', 'admin_token.created', '--created-after', '2000-01-01T00:00:00Z'], asToken);
    expect(audit.data).toEqual([expect.objectContaining({ actor: 'root', action: 'admin_token.created', target: created.id })]);

    const table = await cli(['audit', 'list', '--target', created.id]);
    expect(table.stdout.split('\n')[0]).toMatch(/^TIME\s+ACTOR\s+ACTION\s+TARGET\s+CLIENT_IP\s+REQUEST_ID$/);
    expect(table.stdout).toContain('admin_token.created');

    expect((await json(['tokens', 'revoke', created.id])).status).toBe('revoked');
    const revoked = await cli(['keys', 'list'], asToken);
    expect(revoked).toMatchObject({ code: 1, stdout: '' });
    expect(revoked.stderr).toMatch(/^error: 401 /);

    const list = await cli(['tokens', 'list', '--status', 'revoked']);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+STATUS\s+SCOPES\s+HINT\s+EXPIRES\s+CREATED$/);
    expect(list.stdout).toContain(created.id);
    expect(list.stdout).not.toContain(created.token);
  });

  it("API errors exit 1 with the API's message", async () => {
    const missing = await cli(['tokens', 'get', 'adt_nope']);
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toMatch(/^error: 404 \w+: /);
    const badScope = await cli(['tokens', 'create', '--name', 'x', '--scopes', 'everything']);
    expect(badScope.code).toBe(1);
    expect(badScope.stderr).toMatch(/^error: 400 /);
    const badAction = await cli(['audit', 'list', '--action', 'NOT AN ACTION']);
    expect(badAction.code).toBe(1);
    expect(badAction.stderr).toMatch(/^error: 400 /);
  });
});
