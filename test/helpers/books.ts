import type { Kysely } from 'kysely';
import type { Response } from 'supertest';
import type { Database } from '../../src/db/schema';
import type { FakeImagesApi } from '../fakes/fake-images-api';
import { startArkGateway } from './ark-gateway';
import type { TestGateway } from './test-gateway';

/**
 * The accounting invariant of issue #14, checked against the database: for every key and book
 * (usage_epoch: one period's counter, reopened by reset_usage and by each roll-over),
 * - the key's counter equals the credits of the book's succeeded generations plus those still
 *   pending (so, once nothing is in flight, exactly the succeeded ones: a failed generation is never charged);
 * - the succeeded generations of every book, open or closed, never add up to more than the quota
 *   in force while that book was open.
 * "In force" is what observe() saw: call it after every step that may change a quota or open a book.
 */
export class Books {
  /** `${key id} ${epoch}` -> the highest quota seen while that book was the key's current one. */
  private readonly quotaInForce = new Map<string, number>();
  /** key id -> the highest quota ever seen (for a book opened and closed between two observations). */
  private readonly highestQuota = new Map<string, number>();

  constructor(private readonly db: Kysely<Database>) {}

  async observe(): Promise<void> {
    const projects = await this.db.selectFrom('projects').select(['id', 'usage_epoch', 'credits_quota']).execute();
    for (const project of projects) {
      const book = `${project.id} ${Number(project.usage_epoch)}`;
      this.quotaInForce.set(book, Math.max(this.quotaInForce.get(book) ?? 0, Number(project.credits_quota)));
      this.highestQuota.set(project.id, Math.max(this.highestQuota.get(project.id) ?? 0, Number(project.credits_quota)));
    }
    const keys = await this.db.selectFrom('api_keys').select(['id', 'usage_epoch', 'credits_quota']).execute();
    for (const key of keys) {
      const book = `${key.id} ${Number(key.usage_epoch)}`;
      this.quotaInForce.set(book, Math.max(this.quotaInForce.get(book) ?? 0, Number(key.credits_quota)));
      this.highestQuota.set(key.id, Math.max(this.highestQuota.get(key.id) ?? 0, Number(key.credits_quota)));
    }
  }

  /** Every breach of the invariant, in words; empty when the books are exact. */
  async violations(options: { settled?: boolean; keyId?: string } = {}): Promise<string[]> {
    await this.observe();
    let keysQuery = this.db.selectFrom('api_keys').select(['id', 'usage_epoch', 'credits_used', 'credits_quota']);
    let sumsQuery = this.db
      .selectFrom('generations')
      .select(['key_id', 'usage_epoch', 'status'])
      .select((eb) => [eb.fn.sum<number>('credits').as('credits'), eb.fn.sum<number>('charged_credits').as('kept')])
      .where('key_id', 'is not', null);
    if (options.keyId !== undefined) {
      keysQuery = keysQuery.where('id', '=', options.keyId);
      sumsQuery = sumsQuery.where('key_id', '=', options.keyId);
    }
    const keys = await keysQuery.execute();
    const sums = await sumsQuery.groupBy(['key_id', 'usage_epoch', 'status']).execute();
    const credits = (keyId: string, epoch: number, status: string) =>
      Number(sums.find((s) => s.key_id === keyId && Number(s.usage_epoch) === epoch && s.status === status)?.credits ?? 0);
    // What canceled generations kept: the upstream calls they had sent (src/generation/charges.ts).
    const kept = (keyId: string, epoch: number) =>
      sums.filter((s) => s.key_id === keyId && Number(s.usage_epoch) === epoch && s.status !== 'succeeded').reduce((sum, s) => sum + Number(s.kept ?? 0), 0);
    const problems: string[] = [];
    for (const key of keys) {
      const epoch = Number(key.usage_epoch);
      const counted = Number(key.credits_used);
      const succeeded = credits(key.id, epoch, 'succeeded');
      // Active (queued or running) generations hold their reservation until they settle.
      const pending = credits(key.id, epoch, 'queued') + credits(key.id, epoch, 'running');
      const charged = kept(key.id, epoch);
      if (counted !== succeeded + pending + charged) {
        problems.push(`${key.id} book ${epoch}: counter ${counted}, but succeeded ${succeeded} + pending ${pending} + kept by cancels ${charged}`);
      }
      if (options.settled && pending !== 0) problems.push(`${key.id} book ${epoch}: ${pending} credits still pending`);
    }
    problems.push(...(await this.projectViolations(options)));
    for (const sum of sums) {
      if (sum.status !== 'succeeded' || sum.key_id === null) continue;
      const epoch = Number(sum.usage_epoch);
      const quota = this.quotaInForce.get(`${sum.key_id} ${epoch}`) ?? this.highestQuota.get(sum.key_id) ?? 0;
      if (Number(sum.credits) > quota) problems.push(`${sum.key_id} book ${epoch}: ${Number(sum.credits)} credits succeeded, quota in force ${quota}`);
    }
    return problems;
  }

  /**
   * The same invariant one level up (issue #38): every project's book counts exactly the credits of
   * the generations reserved from it (project_id, project_usage_epoch) that succeeded, are pending or
   * were kept by a cancel, and its succeeded ones never exceed the quota in force.
   */
  private async projectViolations(options: { settled?: boolean; keyId?: string }): Promise<string[]> {
    let projectsQuery = this.db.selectFrom('projects').select(['id', 'usage_epoch', 'credits_used']);
    let sumsQuery = this.db
      .selectFrom('generations')
      .select(['project_id', 'project_usage_epoch', 'status'])
      .select((eb) => [eb.fn.sum<number>('credits').as('credits'), eb.fn.sum<number>('charged_credits').as('kept')])
      .where('project_id', 'is not', null);
    // With a key: only its project's book (other projects' generation rows may have been swept by retention since).
    const keyId = options.keyId;
    if (keyId !== undefined) {
      const ofKey = this.db.selectFrom('api_keys').select('project_id').where('id', '=', keyId);
      projectsQuery = projectsQuery.where('id', 'in', ofKey.$castTo<string>());
      sumsQuery = sumsQuery.where('project_id', 'in', ofKey);
    }
    const projects = await projectsQuery.execute();
    const sums = await sumsQuery.groupBy(['project_id', 'project_usage_epoch', 'status']).execute();
    const of = (projectId: string, epoch: number) => sums.filter((s) => s.project_id === projectId && Number(s.project_usage_epoch) === epoch);
    const problems: string[] = [];
    for (const project of projects) {
      const epoch = Number(project.usage_epoch);
      const book = of(project.id, epoch);
      const succeeded = book.filter((s) => s.status === 'succeeded').reduce((sum, s) => sum + Number(s.credits), 0);
      const pending = book.filter((s) => s.status === 'queued' || s.status === 'running').reduce((sum, s) => sum + Number(s.credits), 0);
      const kept = book.filter((s) => s.status !== 'succeeded').reduce((sum, s) => sum + Number(s.kept ?? 0), 0);
      if (Number(project.credits_used) !== succeeded + pending + kept) {
        problems.push(
          `project ${project.id} book ${epoch}: counter ${Number(project.credits_used)}, but succeeded ${succeeded} + pending ${pending} + kept by cancels ${kept}`,
        );
      }
      if (options.settled && pending !== 0) problems.push(`project ${project.id} book ${epoch}: ${pending} credits still pending`);
    }
    for (const sum of sums) {
      if (sum.status !== 'succeeded' || sum.project_id === null || sum.project_id === undefined) continue;
      const epoch = Number(sum.project_usage_epoch);
      const quota = this.quotaInForce.get(`${sum.project_id} ${epoch}`) ?? this.highestQuota.get(sum.project_id) ?? 0;
      if (Number(sum.credits) > quota)
        problems.push(`project ${sum.project_id} book ${epoch}: ${Number(sum.credits)} credits succeeded, quota in force ${quota}`);
    }
    return problems;
  }

  /**
   * The money invariant of issue #29: every image an upstream made is paid by a key (a succeeded
   * generation, or the credits a cancel kept) or listed as the operator's loss (unbilled_images).
   * `made`: the prompts of the upstream calls that produced an image (each prompt names one generation).
   */
  async unpaidImages(made: readonly string[]): Promise<string[]> {
    const rows = await this.db
      .selectFrom('generations')
      .select(['id', 'status', 'images', 'credits', 'charged_credits', 'unbilled_images', 'request'])
      .execute();
    const paid = new Map<string, { id: string; images: number }>();
    for (const row of rows) {
      const prompt = row.request === null ? undefined : (JSON.parse(row.request) as { request: { prompt: string } }).request.prompt;
      if (prompt === undefined) continue;
      const keptImages = Number(row.credits) > 0 ? Math.round((Number(row.charged_credits ?? 0) * Number(row.images)) / Number(row.credits)) : 0;
      const images = (row.status === 'succeeded' ? Number(row.images) : keptImages) + Number(row.unbilled_images ?? 0);
      const before = paid.get(prompt);
      paid.set(prompt, { id: before ? `${before.id},${row.id}` : row.id, images: (before?.images ?? 0) + images });
    }
    const calls = new Map<string, number>();
    for (const prompt of made) calls.set(prompt, (calls.get(prompt) ?? 0) + 1);
    const problems: string[] = [];
    for (const [prompt, count] of calls) {
      const covered = paid.get(prompt);
      if ((covered?.images ?? 0) < count)
        problems.push(`"${prompt}": ${count} images made upstream, ${covered?.images ?? 0} paid or listed (${covered?.id ?? 'no generation'})`);
    }
    return problems;
  }
}

/**
 * Models whose upstream is the fake Ark API, so a generation can be held in flight: `held-1`
 * costs 1 credit, `held-3` 3; `local-1` (1 credit) answers at once.
 */
export const BOOKS_CATALOG = [
  { model: 'local-1', provider: 'local', upstream_model: 'local-1', credits_per_image: 1, default_size: '32x32' },
  { model: 'held-1', provider: 'jimeng', transport: 'ark', upstream_model: 'held', credits_per_image: 1, default_size: '1024x1024' },
  { model: 'held-3', provider: 'jimeng', transport: 'ark', upstream_model: 'held', credits_per_image: 3, default_size: '1024x1024' },
];

/** An upstream refusal the gateway does not retry and the circuit breaker does not count. */
export const UPSTREAM_REFUSAL = '[error:InputTextSensitiveContentDetected:400]';

export interface InFlight {
  tag: string;
  /** The client's answer; it arrives once the generation is let go (or at once when refused). */
  response: Promise<Response>;
  /** False when the gateway answered before calling the upstream (refused: 401, 402, ...). */
  reserved: boolean;
  /** Lets the upstream answer (success, or the refusal when started with `fail`) and waits for the client's answer. */
  finish(): Promise<Response>;
}

export interface BooksGateway {
  t: TestGateway;
  ark: FakeImagesApi;
  books: Books;
  /** Sends a generation whose upstream call waits until finish(); resolves once its credits are reserved (or it was refused). */
  startHeld(key: string, options: { tag: string; fail?: boolean; model?: 'held-1' | 'held-3' }): Promise<InFlight>;
  /** Lets every held generation go and waits (bounded) until none is pending. */
  settleAll(): Promise<void>;
  close(): Promise<void>;
}

/**
 * For asynchronous generations: one background run at a time, the queue polled every 50 ms, so a
 * second submission stays queued while the first is held.
 */
export const ONE_BACKGROUND_RUN = { GENERATION_WORKER_CONCURRENCY: '1', GENERATION_POLL_MS: '50' };

/** A gateway on BOOKS_CATALOG whose `held-*` models call the fake Ark API; `env` adds to its settings. */
export async function startBooksGateway(env: Record<string, string> = {}): Promise<BooksGateway> {
  const { t, ark } = await startArkGateway({ apiKey: 'ark-books', env: { MODEL_CATALOG: JSON.stringify(BOOKS_CATALOG), ...env } });
  return {
    t,
    ark,
    books: new Books(t.gateway.database.db),
    async startHeld(key, { tag, fail = false, model = 'held-1' }) {
      const prompt = `held ${tag} [hold:${tag}]${fail ? ` ${UPSTREAM_REFUSAL}` : ''}`;
      const response = t.api.client(key, { prompt, model });
      // The upstream sees the call only after the reservation committed; a refusal answers first.
      const reserved = await Promise.race([ark.whenHeld(tag).then(() => true), response.then(() => false)]);
      return {
        tag,
        response,
        reserved,
        finish() {
          ark.releaseHeld(tag);
          return response;
        },
      };
    },
    async settleAll() {
      ark.releaseHeld();
      const deadline = Date.now() + 20_000;
      for (;;) {
        const pending = await t.gateway.database.db.selectFrom('generations').select('id').where('status', 'in', ['queued', 'running']).executeTakeFirst();
        if (!pending) return;
        if (Date.now() > deadline) throw new Error(`generation ${pending.id} is still pending`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    close: () => t.close(),
  };
}
