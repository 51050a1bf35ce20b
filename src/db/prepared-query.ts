import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';
import type { Database } from './schema';
import { directRunOf } from './sqlite-direct';

const MARK = '\u0000placeholder:';

/**
 * A query that kysely builds and compiles once per SQL dialect, then runs many times with new
 * parameter values. Building and compiling is most of kysely's cost per query, so hot-path queries
 * (one per step of every generation) use this.
 *
 * `build` receives placeholders for the named arguments; every value it hands to kysely must be a
 * placeholder or a constant. Compilation records which parameter slot each placeholder landed in.
 */
export function preparedQuery<Args extends Record<string, unknown>, Row>(
  names: ReadonlyArray<keyof Args & string>,
  build: (db: Kysely<Database>, p: Args) => Compilable<Row>,
): (db: Kysely<Database>, args: Args) => Promise<QueryResult<Row>> {
  // Keyed by the dialect adapter class: a transaction compiles exactly like its database.
  const byDialect = new WeakMap<object, { compiled: CompiledQuery<Row>; slots: Array<{ name: string } | { constant: unknown }> }>();
  return async (db, args) => {
    const dialect = db.getExecutor().adapter.constructor;
    let prepared = byDialect.get(dialect);
    if (!prepared) {
      const markers = Object.fromEntries(names.map((name) => [name, `${MARK}${name}`])) as unknown as Args;
      const compiled = build(db, markers).compile();
      const slots = compiled.parameters.map((value) =>
        typeof value === 'string' && value.startsWith(MARK) ? { name: value.slice(MARK.length) } : { constant: value },
      );
      prepared = { compiled, slots };
      byDialect.set(dialect, prepared);
    }
    const parameters = prepared.slots.map((slot) => ('name' in slot ? args[slot.name] : slot.constant));
    // SQLite: on the connection at once when it may (sqlite-direct.ts); else through kysely.
    const direct = directRunOf(db)?.(db, prepared.compiled.sql, parameters);
    return (direct as QueryResult<Row> | undefined) ?? db.executeQuery<Row>({ ...prepared.compiled, parameters });
  };
}
