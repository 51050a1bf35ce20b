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

  /** `db`: the settling transaction when a completion webhook's body is built. */
  async resource(row: GenerationsTable, db: Kysely<Database> = this.deps.db): Promise<ClientGeneration> {
    const [resource] = await this.resources([row], db);
    return resource!;
  }

  /**
   * A page of rows shaped as resources, with one read of their projects' retention policies and one
   * of their stored images however many rows the page holds.
   */
  async resources(rows: readonly GenerationsTable[], db: Kysely<Database> = this.deps.db): Promise<ClientGeneration[]> {
    // One after the other: `db` may be a transaction.
    const policies = await this.policiesOf(rows, db);
    const images = await this.outputsOf(rows, db);
    return Promise.all(
      rows.map(async (row) => {
        const format = row.request === null ? 'url' : ((JSON.parse(row.request) as StoredGenerationRequest).request.responseFormat ?? 'url');
        const data = row.status === 'succeeded' ? await this.shapeImages(images.get(row.id) ?? [], format) : null;
        return this.shape(row, data, policies.get(row.project_id ?? '') ?? this.gatewayPolicy());
      }),
    );
  }

  private gatewayPolicy(): PromptRetention {
    return this.deps.promptRetention ?? 'full';
  }

  /** The policy that applies to each row now, by project id: its project's (as the project is now), else the gateway's. */
  private async policiesOf(rows: readonly GenerationsTable[], db: Kysely<Database>): Promise<Map<string, PromptRetention>> {
    const projectIds = [...new Set(rows.flatMap((row) => (row.project_id == null ? [] : [row.project_id])))];
    if (projectIds.length === 0) return new Map();
    const projects = await db.selectFrom('projects').select(['id', 'prompt_retention']).where('id', 'in', projectIds).execute();
    return new Map(projects.map((project) => [project.id, (project.prompt_retention ?? this.gatewayPolicy()) as PromptRetention]));
  }

  private shape(row: GenerationsTable, data: Schemas['GeneratedImage'][] | null, policy: PromptRetention): ClientGeneration {
    const { prompt, prompt_sha256, prompt_retention } = promptView(row, policy);
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

  /** The succeeded rows' stored images, by generation id, in order; those swept after their retention are left out. */
  private async outputsOf(rows: readonly GenerationsTable[], db: Kysely<Database>): Promise<Map<string, StoredImagesTable[]>> {
    const ids = rows.filter((row) => row.status === 'succeeded').map((row) => row.id);
    if (ids.length === 0) return new Map();
    const stored: StoredImagesTable[] = await db
      .selectFrom('stored_images')
      .selectAll()
      .where('generation_id', 'in', ids)
      .where('role', '=', 'output')
      .where('deleted_at', 'is', null)
      .where('expires_at', '>', this.deps.clock.now())
      .orderBy('generation_id')
      .orderBy('position')
      .execute();
    const byGeneration = new Map<string, StoredImagesTable[]>();
    for (const image of stored) byGeneration.set(image.generation_id, [...(byGeneration.get(image.generation_id) ?? []), image]);
    return byGeneration;
  }

  /** Signed URLs, or the images read back as base64. */
  private shapeImages(rows: readonly StoredImagesTable[], format: 'url' | 'b64_json'): Promise<Schemas['GeneratedImage'][]> {
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
