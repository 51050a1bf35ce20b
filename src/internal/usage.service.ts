import type { Kysely } from 'kysely';
import type { components } from '../../generated/creative';
import type { Database, GenerationsTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { listAttempts } from '../generation/attempts.repository';
import { generationPage, type GenerationListQuery } from '../generation/generation-list';
import { aggregateUsage, findGeneration } from '../generation/generations.repository';
import { toIso, toIsoOrNull } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { parseTimestamp } from '../shared/rfc3339';
import { generationModerationDetailOf } from '../guardrails/project-moderation';

type Schemas = components['schemas'];
export type GenerationResource = Schemas['Generation'];

function toGenerationResource(row: GenerationsTable): GenerationResource {
  return {
    id: row.id,
    key_id: row.key_id,
    client_id: row.client_id,
    model: row.model,
    requested_model: row.requested_model ?? row.model,
    provider: row.provider,
    images: row.images,
    credits: row.credits,
    status: row.status as GenerationResource['status'],
    error_code: row.error_code,
    latency_ms: row.latency_ms,
    created_at: toIso(row.created_at),
    completed_at: toIsoOrNull(row.completed_at),
    moderation: generationModerationDetailOf(row),
  };
}

/** Reading generations and usage for the internal API. */
export class UsageService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly cursors: CursorCodec,
  ) {}

  async listGenerations(query: GenerationListQuery): Promise<{ data: GenerationResource[]; next_cursor: string | null }> {
    const { page, nextCursor } = await generationPage(this.db, this.cursors, query, 50);
    return { data: page.map(toGenerationResource), next_cursor: nextCursor };
  }

  async getGeneration(id: string): Promise<GenerationResource> {
    const row = await findGeneration(this.db, id);
    if (!row) throw new ApiError('generation_not_found', `No generation with id ${id}.`, { param: 'id' });
    const attempts = await listAttempts(this.db, id);
    return {
      ...toGenerationResource(row),
      attempts: attempts.map((a) => ({
        image_index: a.image_index,
        model: a.model ?? null,
        channel_id: a.channel_id,
        outcome: a.outcome as 'succeeded' | 'failed' | 'failed_over',
        error_code: a.error_code,
        latency_ms: a.latency_ms,
        started_at: toIso(a.started_at),
        upstream_usage: a.upstream_usage ? (JSON.parse(a.upstream_usage) as Schemas['UpstreamTokenUsage']) : null,
      })),
    };
  }

  async usage(query: { from: string; to: string; key_id?: string }): Promise<Schemas['UsageRow'][]> {
    const from = parseTimestamp(query.from, 'from');
    const to = parseTimestamp(query.to, 'to');
    if (!(to > from)) throw new ApiError('invalid_request', '`to` must be after `from`.', { param: 'to' });
    const rows = await aggregateUsage(this.db, { from, to, keyId: query.key_id });
    return rows.map((row) => ({
      day: toIso(row.day_start).slice(0, 10),
      key_id: row.key_id,
      client_id: row.client_id,
      model: row.model,
      generations: row.generations,
      images: row.images,
      credits: row.credits,
    }));
  }
}
