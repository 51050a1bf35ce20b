import { type Kysely, type Migration, sql } from 'kysely';

export const migration: Migration = {
  // Issue #29 §6: a token's children are found by created_by (revocation cascades to them), and
  // tokens issued before children were bound to their parent are brought in line: a child
  // expires no later than its parent and is revoked when its parent is. Issue #29 §8: the
  // `usage:read` scope opened no operation and is gone from the spec; stored tokens drop it.
  async up(db: Kysely<unknown>) {
    await db.schema.createIndex('admin_tokens_created_by_idx').on('admin_tokens').columns(['created_by']).execute();
    const { rows } = await sql<{ id: string; created_by: string; scopes: string; expires_at: string | number | null; revoked_at: string | number | null }>`
          SELECT id, created_by, scopes, expires_at, revoked_at FROM admin_tokens ORDER BY created_at, id`.execute(db);
    const effective = new Map<string, { expiresAt: number | null; revokedAt: number | null }>();
    const orNull = (value: string | number | null) => (value === null ? null : Number(value));
    // Parents are created before their children, so one pass in creation order sees each parent first.
    for (const row of rows) {
      const own = { expiresAt: orNull(row.expires_at), revokedAt: orNull(row.revoked_at) };
      const parent = effective.get(row.created_by);
      const bound = parent
        ? {
            expiresAt: parent.expiresAt === null ? own.expiresAt : Math.min(own.expiresAt ?? parent.expiresAt, parent.expiresAt),
            revokedAt: own.revokedAt ?? parent.revokedAt,
          }
        : own;
      effective.set(row.id, bound);
      const scopes = (JSON.parse(row.scopes) as string[]).filter((scope) => scope !== 'usage:read');
      if (bound.expiresAt !== own.expiresAt || bound.revokedAt !== own.revokedAt || scopes.length !== JSON.parse(row.scopes).length) {
        await sql`UPDATE admin_tokens SET expires_at = ${bound.expiresAt}, revoked_at = ${bound.revokedAt}, scopes = ${JSON.stringify(scopes)}
              WHERE id = ${row.id}`.execute(db);
      }
    }
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('admin_tokens_created_by_idx').execute();
  },
};
