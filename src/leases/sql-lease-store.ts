import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../db/schema';
import { capabilitiesOf } from '../db/storage-capabilities';
import { randomBase62 } from '../shared/ids';
import { type Acquisition, fits, type LeaseClaim, type LeaseRef, type LeaseStore, reportsFreesAt, scopeKey, type ScopeState } from './lease-store';

/**
 * Leases in the `leases` table, one row per lease and scope. Exact across processes: where the engine
 * has advisory locks (PostgreSQL) one per owner serialises an acquisition; on SQLite its first statement
 * is a write, which holds the database's write lock until commit. An acquisition is one transaction:
 * lock (advisory), drop the expired, insert only if every claim fits (one statement), read the state.
 */
export class SqlLeaseStore implements LeaseStore {
  constructor(private readonly db: Kysely<Database>) {}

  async acquire(claims: readonly LeaseClaim[], now: number, leaseId = randomBase62(12)): Promise<Acquisition> {
    const taken = claims.filter((claim) => claim.units > 0);
    if (taken.length === 0) {
      // Nothing to take: one read, no transaction.
      const states = await this.states(this.db, claims, now, (claim) => claim.limit !== null || claim.reportFreesAt === true);
      return outcome(
        claims,
        states,
        claims.every((claim, i) => fits(claim.limit, states[i]!.held, claim.units)),
        leaseId,
      );
    }
    return this.db.transaction().execute(async (trx) => {
      if (capabilitiesOf(trx).advisoryLocks) await sql`SELECT pg_advisory_xact_lock(hashtext(${`lease:${claims[0]!.scope.owner}`}))`.execute(trx);
      await trx
        .deleteFrom('leases')
        .where(
          'scope',
          'in',
          claims.map((claim) => scopeKey(claim.scope)),
        )
        .where('expires_at', '<=', now)
        .execute();
      const rows = sql.join(
        taken.map(
          (claim) =>
            sql`SELECT CAST(${scopeKey(claim.scope)} AS varchar(128)) AS scope, CAST(${leaseId} AS varchar(64)) AS lease_id, CAST(${claim.units} AS integer) AS units, CAST(${claim.expiresAt} AS bigint) AS expires_at`,
        ),
        sql` UNION ALL `,
      );
      const room = sql.join(
        claims.filter((claim) => claim.limit !== null).map((claim) => sql`${heldIn(claim, now)} + ${claim.units} <= ${claim.limit}`),
        sql` AND `,
      );
      const limited = claims.some((claim) => claim.limit !== null);
      const inserted = await sql`
        INSERT INTO leases (scope, lease_id, units, expires_at)
        SELECT scope, lease_id, units, expires_at FROM (${rows}) AS claimed
        ${limited ? sql`WHERE ${room}` : sql``}`.execute(trx);
      const granted = Number(inserted.numAffectedRows ?? 0) > 0;
      // Which claim refused is known only from the state: freesAt is read for every limited one then.
      const states = await this.states(trx, claims, now, (claim) => claim.reportFreesAt === true || (!granted && claim.limit !== null));
      return outcome(claims, states, granted, leaseId);
    });
  }

  check(claims: readonly LeaseClaim[], now: number): Promise<ScopeState[]> {
    return this.states(this.db, claims, now, (claim) => claim.reportFreesAt === true);
  }

  /**
   * Every claim's scope in one statement: its live units and, where `report` says, the expiry of
   * the unit (oldest expiry first) whose lapse leaves room for the claim (see freesAtIndex).
   */
  private async states(
    db: Kysely<Database>,
    claims: readonly LeaseClaim[],
    now: number,
    report: (claim: LeaseClaim, index: number) => boolean,
  ): Promise<ScopeState[]> {
    const columns = claims.map((claim, i) => {
      const held = heldIn(claim, now);
      const frees = report(claim, i)
        ? sql`(SELECT min(expires_at) FROM (
            SELECT expires_at, sum(units) OVER (ORDER BY expires_at, lease_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto
            FROM leases WHERE scope = ${scopeKey(claim.scope)} AND expires_at > ${now}) AS ordered
            WHERE upto > ${claim.limit === null ? sql`0` : sql`${held} + ${claim.units} - ${claim.limit} - 1`})`
        : sql`NULL`;
      return sql`${held} AS ${sql.ref(`held_${i}`)}, ${frees} AS ${sql.ref(`frees_${i}`)}`;
    });
    const { rows } = await sql<Record<string, number | string | null>>`SELECT ${sql.join(columns)}`.execute(db);
    const row = rows[0]!;
    return claims.map((_, i): ScopeState => {
      const frees = row[`frees_${i}`];
      return frees === null || frees === undefined ? { held: Number(row[`held_${i}`]) } : { held: Number(row[`held_${i}`]), freesAt: Number(frees) };
    });
  }

  async release(leases: readonly LeaseRef[]): Promise<void> {
    if (leases.length === 0) return;
    await sql`DELETE FROM leases WHERE ${matching(leases)}`.execute(this.db);
  }

  async renew(leases: readonly LeaseRef[], expiresAt: number): Promise<void> {
    if (leases.length === 0) return;
    await sql`UPDATE leases SET expires_at = ${expiresAt} WHERE ${matching(leases)}`.execute(this.db);
  }

  async close(): Promise<void> {}
}

/** Live units in the claim's scope. */
function heldIn(claim: LeaseClaim, now: number): RawBuilder<unknown> {
  return sql`(SELECT coalesce(sum(units), 0) FROM leases WHERE scope = ${scopeKey(claim.scope)} AND expires_at > ${now})`;
}

/**
 * The acquisition from the state read in it (before any insert when refused): a refusal names the
 * first claim that does not fit, and keeps freesAt only where acquire reports it.
 */
function outcome(claims: readonly LeaseClaim[], states: ScopeState[], granted: boolean, leaseId: string): Acquisition {
  const refusedClaim = granted
    ? -1
    : Math.max(
        0,
        claims.findIndex((claim, i) => !fits(claim.limit, states[i]!.held, claim.units)),
      );
  const reported = states.map((state, i) => (reportsFreesAt(claims[i]!, i, refusedClaim) ? state : { held: state.held }));
  return granted ? { granted: true, leaseId, states: reported } : { granted: false, refusedClaim, states: reported };
}

/** Rows of these leases: (scope, lease_id) pairs, through the primary key. */
function matching(leases: readonly LeaseRef[]): RawBuilder<unknown> {
  return sql`(scope, lease_id) IN (${sql.join(leases.map((ref) => sql`(${scopeKey(ref.scope)}, ${ref.leaseId})`))})`;
}
