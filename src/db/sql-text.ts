import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type RawBuilder } from 'kysely';

/** Compiles only, never connects: turns kysely fragments into the text of hand-written PostgreSQL statements. */
const postgresCompiler = new Kysely<Record<string, never>>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/**
 * The PostgreSQL text of a fragment built from sql.raw() and sql.lit() parts only. A bound value
 * would be lost (the text has nowhere to carry it), so one is refused.
 */
export function postgresText(fragment: RawBuilder<unknown>): string {
  const compiled = fragment.compile(postgresCompiler);
  if (compiled.parameters.length > 0) throw new Error(`postgresText: the fragment binds ${compiled.parameters.length} value(s): ${compiled.sql}`);
  return compiled.sql;
}
