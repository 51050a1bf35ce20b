import { type Kysely, type Migration, sql } from 'kysely';
import type { DatabaseEngine } from '../database';

export function migration(engine: DatabaseEngine): Migration {
  return {
    // The audit log must not depend on the application alone to stay untouched: the database
    // itself refuses to change or delete an event (whoever connects, unless they drop the
    // trigger, which needs the table owner). The gateway never prunes events; a retention policy
    // would be a documented DBA step (see docs/operators/security.md, "Audit log").
    async up(db: Kysely<unknown>) {
      if (engine === 'postgres') {
        await sql`
            CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
            END
            $$`.execute(db);
        await sql`CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()`.execute(
          db,
        );
        // TRUNCATE fires no row trigger: refused by its own.
        await sql`CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()`.execute(
          db,
        );
      } else {
        for (const operation of ['UPDATE', 'DELETE']) {
          await sql
            .raw(
              `CREATE TRIGGER audit_events_no_${operation.toLowerCase()} BEFORE ${operation} ON audit_events ` +
                `BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: ${operation} refused'); END`,
            )
            .execute(db);
        }
      }
    },
    async down(db: Kysely<unknown>) {
      if (engine === 'postgres') {
        await sql`DROP TRIGGER audit_events_no_truncate ON audit_events`.execute(db);
        await sql`DROP TRIGGER audit_events_append_only ON audit_events`.execute(db);
        await sql`DROP FUNCTION audit_events_append_only()`.execute(db);
      } else {
        await sql`DROP TRIGGER audit_events_no_update`.execute(db);
        await sql`DROP TRIGGER audit_events_no_delete`.execute(db);
      }
    },
  };
}
