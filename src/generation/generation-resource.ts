import type { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { components } from '../../generated/gateway';
import type { Database, GenerationsTable, StoredImagesTable } from '../db/schema';
import { ERROR_CODES, type ErrorCode } from '../errors/error-codes';
import { generationModerationOf } from '../guardrails/project-moderation';
import type { ImagesService } from '../images/images.service';
import { type PromptRetention, promptView } from '../maintenance/prompt-retention';
import type { Clock } from '../shared/clock';
import { toIso, toIsoOrNull } from '../shared/clock';
import type { StoredGenerationRequest } from './durable';

type Schemas = components['schemas'];
export type ClientGeneration = Schemas['ClientGeneration'];

/**
 * A generation as its key holder reads it (GET, list, cancel, a completion webhook's body): images
 * re-signed (or read back as base64) from the image store on each read, and its prompt only while the
 * policy that applies to it keeps it (src/maintenance/prompt-retention.ts).
 */
export class GenerationResources {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      clock: Clock;
      images: ImagesService;
      /** PROMPT_RETENTION: the policy of a generation whose project has none of its own (`full` when absent). */
      promptRetention?: PromptRetention;
    },
  ) {}

  /** The policy that applies to the row now: its project's (as the project is now), else the gateway's. */
  private async policyOf(row: GenerationsTable, db: Kysely<Database>): Promise<PromptRetention> {
    const gateway = this.deps.promptRetention ?? 'full';
    if (row.project_id == null) return gateway;
    const project = await db.selectFrom('projects').select('prompt_retention').where('id', '=', row.project_id).executeTakeFirst();
    return (project?.prompt_retention ?? gateway) as PromptRetention;
  }

  /** `db`: the settling transaction when a completion webhook's body is built. */
  async resource(row: GenerationsTable, db: Kysely<Database> = this.deps.db): Promise<ClientGeneration> {
    const stored = row.request === null ? undefined : (JSON.parse(row.request) as StoredGenerationRequest);
    const data = row.status === 'succeeded' ? await this.images(row.id, stored?.request.responseFormat ?? 'url', db) : null;
    const { prompt, prompt_sha256, prompt_retention } = promptView(row, await this.policyOf(row, db));
    return {
      id: row.id,
      object: 'generation',
      status: row.status as ClientGeneration['status'],
      model: row.model,
      requested_model: row.requested_model ?? row.model,
      provider: row.provider,
      created_at: toIso(row.created_at),
      started_at: toIsoOrNull(row.started_at),
      completed_at: toIsoOrNull(row.completed_at),
      error: row.status === 'failed' || row.status === 'canceled' ? errorOf(row) : null,
      data,
      usage: {
        // Delivered when it succeeded, whether or not they are still stored (synchronous b64_json
        // answers are not; stored ones leave after their retention).
        images: row.status === 'succeeded' ? row.images : 0,
        credits_reserved: row.status === 'queued' || row.status === 'running' ? row.credits : 0,
        credits_charged: row.status === 'succeeded' ? row.credits : Number(row.charged_credits ?? 0),
      },
      project_id: row.project_id ?? null,
      prompt,
      prompt_sha256,
      prompt_retention,
      moderation: generationModerationOf(row),
    };
  }

  /** A succeeded generation's stored images; those swept after their retention are left out. */
  private async images(generationId: string, format: 'url' | 'b64_json', db: Kysely<Database>): Promise<Schemas['GeneratedImage'][]> {
    const now = this.deps.clock.now();
    const rows: StoredImagesTable[] = await db
      .selectFrom('stored_images')
      .selectAll()
      .where('generation_id', '=', generationId)
      .where('role', '=', 'output')
      .where('deleted_at', 'is', null)
      .where('expires_at', '>', now)
      .orderBy('position')
      .execute();
    return Promise.all(
      rows.map(async (row) => {
        const size = { width: Number(row.width), height: Number(row.height) };
        if (format === 'url') return { url: this.deps.images.signedUrl({ id: row.id, expires_at: Number(row.expires_at) }), ...size };
        return { b64_json: (await readAll(await this.deps.images.read(row))).toString('base64'), ...size };
      }),
    );
  }
}

function errorOf(row: GenerationsTable): NonNullable<ClientGeneration['error']> {
  const code = row.error_code ?? 'internal_error';
  const known = (ERROR_CODES as Record<string, { type: string } | undefined>)[code as ErrorCode];
  const type = known?.type ?? (code === 'canceled' ? 'invalid_request_error' : 'api_error');
  return { code, message: row.error_message ?? `The generation ended as ${code}.`, type };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks);
}
