import { ALL_ADMIN_SCOPES } from '../../src/admin-tokens/admin-token.model';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { operationsOf } from '../../src/http/spec-router';
import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

const gateway = loadOpenApiDocument('gateway');
const creative = loadOpenApiDocument('creative');
const publishedScopes = (gateway.components as { schemas: { AdminScope: { enum: string[] } } }).schemas.AdminScope.enum;

function requirementsOf(document: typeof gateway, spec: { security?: Array<Record<string, string[]>> }): Array<Record<string, string[]>> {
  return spec.security ?? (document.security as Array<Record<string, string[]>> | undefined) ?? [];
}

// getAdminIdentity (GET /admin/whoami) is the one admin operation without a scope: any admin
// credential may read its own scopes (test/keys/admin-identity.test.ts).
const SCOPELESS = new Set(['getAdminIdentity']);
const ADMIN_SCHEMES = new Set(['AdminSecret', 'AdminAccessJwt', 'ConsoleSession']);
const adminOperations = operationsOf(gateway)
  .map((op) => ({ ...op, requirements: requirementsOf(gateway, op.spec) }))
  .filter((op) => op.requirements.some((requirement) => 'AdminSecret' in requirement))
  .filter((op) => !SCOPELESS.has(op.operationId));

describe('admin scopes: declared in the spec, published, enforced', () => {
  it('the code knows exactly the scopes the AdminScope enum publishes', () => {
    expect([...ALL_ADMIN_SCOPES].sort()).toEqual([...publishedScopes].sort());
  });

  it('every published scope opens at least one operation (issue #29 §8: usage:read opened none)', () => {
    const used = new Set(adminOperations.flatMap((op) => op.requirements.flatMap((requirement) => requirement.AdminSecret ?? [])));
    expect(publishedScopes.filter((scope) => !used.has(scope))).toEqual([]);
  });

  it('the scopeless admin operations declare AdminSecret with no scope', () => {
    const declared = operationsOf(gateway)
      .filter((op) => SCOPELESS.has(op.operationId))
      .map((op) => [op.operationId, requirementsOf(gateway, op.spec)]);
    expect(declared).toEqual([...SCOPELESS].map((id) => [id, [{ AdminAccessJwt: [] }, { ConsoleSession: [] }, { AdminSecret: [] }]]));
  });

  it('every admin operation also admits an Access JWT (AdminAccessJwt, first) and a console session (ConsoleSession) with the same scopes as AdminSecret', () => {
    // First: when no Authorization header is sent, a refused Access JWT is what the 401 explains.
    const wrong = adminOperations
      .filter((op) => {
        const scopes = op.requirements[2]?.AdminSecret;
        return (
          op.requirements.length !== 3 ||
          JSON.stringify(op.requirements[0]) !== JSON.stringify({ AdminAccessJwt: scopes }) ||
          JSON.stringify(op.requirements[1]) !== JSON.stringify({ ConsoleSession: scopes })
        );
      })
      .map((op) => op.operationId);
    expect(wrong).toEqual([]);
  });

  it('every admin operation declares exactly one scope, from the published enum', () => {
    expect(adminOperations.length).toBeGreaterThan(0);
    const wrong = adminOperations
      .flatMap((op) =>
        op.requirements.map((requirement) => ({
          op: op.operationId,
          scopes: requirement.AdminSecret ?? requirement.AdminAccessJwt ?? requirement.ConsoleSession,
        })),
      )
      .filter(({ scopes }) => scopes === undefined || scopes.length !== 1 || !publishedScopes.includes(scopes[0] as string));
    expect(wrong).toEqual([]);
  });

  it('no other scheme declares scopes (only the admin guards enforce them)', () => {
    const declared = [gateway, creative].flatMap((document) =>
      operationsOf(document).flatMap((op) =>
        requirementsOf(document, op.spec).flatMap((requirement) =>
          Object.entries(requirement)
            .filter(([scheme, scopes]) => !ADMIN_SCHEMES.has(scheme) && scopes.length > 0)
            .map(([scheme]) => `${op.operationId} ${scheme}`),
        ),
      ),
    );
    expect(declared).toEqual([]);
  });

  describe('on a running gateway', () => {
    let t: TestGateway;
    beforeAll(async () => {
      t = await startTestGateway();
    });
    afterAll(() => t.close());

    it('each admin operation refuses a token without its scope (403 naming it) and admits one with only that scope', async () => {
      for (const op of adminOperations) {
        const scope = op.requirements[2]?.AdminSecret?.[0] as string;
        const path = op.path.replace(/\{[^}]+\}/g, 'x_1');
        const others = await createAdminTokenVia(
          t.api,
          publishedScopes.filter((s) => s !== scope),
        );
        const refused = await t.api.send(op.method, path, { headers: bearer(others.token), body: {} });
        expect([op.operationId, refused.status, refused.body.error?.code, refused.body.error?.scope]).toEqual([
          op.operationId,
          403,
          'insufficient_scope',
          scope,
        ]);
        const only = await createAdminTokenVia(t.api, [scope]);
        const admitted = await t.api.send(op.method, path, { headers: bearer(only.token), body: {} });
        expect([op.operationId, admitted.status === 401 || admitted.status === 403]).toEqual([op.operationId, false]);
      }
    });
  });
});
