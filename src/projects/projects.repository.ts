import { type Expression, type Kysely, sql, type Updateable } from 'kysely';
import { forUpdate } from '../db/row-lock';
import type { Database, GenerationsTable, ProjectsTable } from '../db/schema';
import { requotaColumns, periodStartNowSql, storedPeriodEndedSql, usedNowSql } from '../keys/rules/quota-period';
import type { ProjectRow, ProjectStatus } from './project.model';

/** All SQL on projects. Every function takes the executor, so it runs inside a transaction (`trx`) too. */
export type Db = Kysely<Database>;

/** The projects columns the period rules (src/keys/rules/quota-period.ts) read: the same rule as a key's, on the project's row. */
const PROJECT_ROW: { createdAt: Expression<number>; periodDays: Expression<number>; periodStartedAt: Expression<number>; creditsUsed: Expression<number> } = {
  createdAt: sql.ref<number>('projects.created_at'),
  periodDays: sql.ref<number>('projects.quota_period_days'),
  periodStartedAt: sql.ref<number>('projects.period_started_at'),
  creditsUsed: sql.ref<number>('projects.credits_used'),
};

export async function insertProject(db: Db, row: ProjectRow): Promise<void> {
  await db.insertInto('projects').values(row).execute();
}

/** `lock`: FOR UPDATE on PostgreSQL, for read-then-write transactions. */
export async function findProjectById(db: Db, id: string, options: { lock?: boolean } = {}): Promise<ProjectRow | undefined> {
  const query = db.selectFrom('projects').selectAll().where('id', '=', id);
  return (options.lock ? forUpdate(db, query) : query).executeTakeFirst();
}

export interface ProjectListQuery {
  status?: ProjectStatus;
  owner?: string;
  limit: number;
  /** Position after which to continue (newest first). */
  after?: { createdAt: number; id: string };
}

/** Newest first; one row more than `limit`, so the caller knows whether a next page exists. */
export async function listProjects(db: Db, query: ProjectListQuery): Promise<ProjectRow[]> {
  let q = db.selectFrom('projects').selectAll();
  if (query.owner !== undefined) q = q.where('owner', '=', query.owner);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  const after = query.after;
  if (after) {
    q = q.where((eb) => eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('id', '<', after.id)])]));
  }
  return q
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(query.limit + 1)
    .execute();
}

export async function updateProject(db: Db, id: string, changes: Updateable<ProjectsTable>): Promise<ProjectRow | undefined> {
  return db.updateTable('projects').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

/** The ids of the project's keys (whose cached entries a change of the project drops). */
export async function projectKeyIds(db: Db, projectId: string): Promise<string[]> {
  const rows = await db.selectFrom('api_keys').select('id').where('project_id', '=', projectId).execute();
  return rows.map((row) => row.id);
}

/** setQuota() of keys.repository.ts on a project's book: the same statement, decided from the row as it is then. */
export async function setProjectQuota(
  db: Db,
  id: string,
  quota: { creditsQuota: number; periodDays: number | null; resetUsage: boolean; now: number },
): Promise<ProjectRow | undefined> {
  return db.updateTable('projects').set(requotaColumns(PROJECT_ROW, quota)).where('id', '=', id).returningAll().executeTakeFirst();
}

export interface ProjectReservation {
  credits_used: number;
  credits_quota: number;
  usage_epoch: number;
  period_started_at: number;
}

/**
 * Reserves `cost` credits of the project's book in one conditional UPDATE, like reserveCredits() of
 * a key: the project active, its period rolled over when it has ended (the key's rule, on the
 * project's row), and the credits there; undefined when not. Runs in the key's reservation
 * transaction after the key's row, so every reservation locks key then project.
 */
export async function reserveProjectCredits(db: Db, id: string, cost: number, now: number): Promise<ProjectReservation | undefined> {
  const ended = storedPeriodEndedSql(PROJECT_ROW, now);
  return db
    .updateTable('projects')
    .set({
      credits_used: sql`CASE WHEN ${ended} THEN ${cost} ELSE credits_used + ${cost} END`,
      period_started_at: periodStartNowSql(PROJECT_ROW, now),
      usage_epoch: sql`CASE WHEN ${ended} THEN usage_epoch + 1 ELSE usage_epoch END`,
    })
    .where('id', '=', id)
    .where('status', '=', 'active')
    .where(sql<boolean>`${usedNowSql(PROJECT_ROW, now)} + ${cost} <= credits_quota`)
    .returning(['credits_used', 'credits_quota', 'usage_epoch', 'period_started_at'])
    .executeTakeFirst();
}

/**
 * Records on the generation row which project book its credits came from (the same transaction as the
 * reservation), and what the project's moderation hook answered when one was asked (the same statement).
 */
export async function recordProjectReservation(
  db: Db,
  generationId: string,
  projectId: string,
  usageEpoch: number,
  moderation?: Pick<Updateable<GenerationsTable>, 'moderation_decision' | 'moderation_latency_ms' | 'moderation_reason' | 'moderation_failure'>,
): Promise<void> {
  await db
    .updateTable('generations')
    .set({ project_id: projectId, project_usage_epoch: usageEpoch, ...moderation })
    .where('id', '=', generationId)
    .execute();
}

/**
 * Gives `credits` of a generation back to the project book it reserved from, and only to that book
 * (like releaseCredits() of a key): nothing for a generation without a project, or once that book
 * is closed (reset_usage, roll-over). Every release of the key's book calls this in the same
 * transaction, with the same amount.
 */
export async function releaseProjectCredits(db: Db, generationId: string, credits: number): Promise<void> {
  const generation = db.selectFrom('generations').where('generations.id', '=', generationId);
  await db
    .updateTable('projects')
    .set({ credits_used: sql`credits_used - ${credits}` })
    .where('id', '=', generation.select('generations.project_id').$castTo<string>())
    .where('usage_epoch', '=', generation.select('generations.project_usage_epoch').$castTo<number>())
    .where('credits_used', '>=', credits)
    .execute();
}
