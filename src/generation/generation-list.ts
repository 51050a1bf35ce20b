import type { Kysely } from 'kysely';
import type { Database, GenerationsTable } from '../db/schema';
import type { CursorCodec } from '../shared/cursor';
import { parseTimestamp } from '../shared/rfc3339';
import { listGenerations } from './generations.repository';

/** The filters the generation lists of the admin and internal APIs take, as their query strings carry them. */
export interface GenerationListQuery {
  key_id?: string;
  client_id?: string;
  model?: string;
  status?: string;
  created_after?: string;
  created_before?: string;
  limit?: number;
  cursor?: string;
}

/** One page of generations, newest first; a malformed timestamp or cursor is a 400 naming its parameter. */
export async function generationPage(
  db: Kysely<Database>,
  cursors: CursorCodec,
  query: GenerationListQuery,
  defaultLimit: number,
): Promise<{ page: GenerationsTable[]; nextCursor: string | null }> {
  const limit = query.limit ?? defaultLimit;
  const rows = await listGenerations(db, {
    keyId: query.key_id,
    clientId: query.client_id,
    model: query.model,
    status: query.status,
    createdAfter: query.created_after === undefined ? undefined : parseTimestamp(query.created_after, 'created_after'),
    createdBefore: query.created_before === undefined ? undefined : parseTimestamp(query.created_before, 'created_before'),
    limit,
    after: query.cursor === undefined ? undefined : cursors.position(query.cursor, 'gen'),
  });
  return cursors.pageOf(rows, limit, 'gen');
}
