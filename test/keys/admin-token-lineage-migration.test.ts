import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database';
import { migrateToLatest } from '../../src/db/migrations';
import { createThrowawayDatabase } from '../helpers/test-database';

describe('migration 0017 (admin token lineage, usage:read dropped) on tokens issued before it', () => {
  it("caps children's expiry at their parent's and revokes the descendants of revoked tokens", async () => {
    const throwaway = await createThrowawayDatabase();
    const database = openDatabase(throwaway.url);
    try {
      await migrateToLatest(database.db as never, database.engine, '0015_completion_webhooks');
      const t0 = 1_800_000_000_000;
      const token = (id: string, createdBy: string, createdAt: number, expiresAt: number | null, revokedAt: number | null) =>
        sql`INSERT INTO admin_tokens (id, token_hash, hint, name, scopes, created_by, expires_at, created_at, revoked_at)
          VALUES (${id}, ${`h_${id}`}, 'h', 'n', '["tokens:write"]', ${createdBy}, ${expiresAt}, ${createdAt}, ${revokedAt})`.execute(database.db);
      // The red team's line: a parent expiring in 4 s, a child without expiry, a grandchild in 2126.
      await token('adt_p', 'root', t0, t0 + 4_000, null);
      await token('adt_c', 'adt_p', t0 + 1, null, null);
      await token('adt_g', 'adt_c', t0 + 2, 4_955_000_000_000, null);
      await token('adt_soon', 'adt_p', t0 + 3, t0 + 1_000, null);
      // A revoked parent whose children kept working.
      await token('adt_r', 'root', t0, null, t0 + 10);
      await token('adt_rc', 'adt_r', t0 + 1, null, null);
      await token('adt_rg', 'adt_rc', t0 + 2, t0 + 99_000, null);
      await token('adt_free', 'root', t0, null, null);
      await sql`UPDATE admin_tokens SET scopes = '["keys:read","usage:read"]' WHERE id = 'adt_free'`.execute(database.db);

      await migrateToLatest(database.db as never, database.engine);
      const rows = await database.db.selectFrom('admin_tokens').select(['id', 'expires_at', 'revoked_at']).orderBy('id').execute();
      const orNull = (value: number | null) => (value === null ? null : Number(value));
      expect(rows.map((r) => [r.id, orNull(r.expires_at), orNull(r.revoked_at)])).toEqual([
        ['adt_c', t0 + 4_000, null],
        ['adt_free', null, null],
        ['adt_g', t0 + 4_000, null],
        ['adt_p', t0 + 4_000, null],
        ['adt_r', null, t0 + 10],
        ['adt_rc', null, t0 + 10],
        ['adt_rg', t0 + 99_000, t0 + 10],
        ['adt_soon', t0 + 1_000, null],
      ]);
      const free = await database.db.selectFrom('admin_tokens').select('scopes').where('id', '=', 'adt_free').executeTakeFirstOrThrow();
      expect(JSON.parse(free.scopes)).toEqual(['keys:read']);
    } finally {
      await database.close();
      await throwaway.drop();
    }
  });
});
