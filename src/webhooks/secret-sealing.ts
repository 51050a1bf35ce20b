import type { Logger } from 'pino';
import { Sealer } from '../shared/sealing';
import type { Db } from '../events/outbox';

const keyContext = (keyId: string) => `key_webhook_secret:${keyId}`;
const projectHookContext = (projectId: string) => `project_moderation_hook:${projectId}`;

/**
 * Webhook signing secrets at rest: sealed (src/shared/sealing.ts) with the endpoint id bound, in
 * both `secret` and `previous_secret`. Signing needs the secret itself, so it is sealed, not hashed.
 */
export class WebhookSecrets {
  constructor(private readonly sealer: Sealer) {}

  private static context(endpointId: string): string {
    return `webhook_endpoint:${endpointId}`;
  }

  seal(endpointId: string, secret: string): string {
    return this.sealer.seal(WebhookSecrets.context(endpointId), secret);
  }

  /** The secret; a value stored before sealing existed (`whsec_...`) is taken as it is until resealed. */
  open(endpointId: string, stored: string): string {
    return Sealer.isSealed(stored) ? this.sealer.open(WebhookSecrets.context(endpointId), stored) : stored;
  }

  /** A client key's completion-webhook secret (key_webhook_secrets), bound to the key id. */
  sealForKey(keyId: string, secret: string): string {
    return this.sealer.seal(keyContext(keyId), secret);
  }

  openForKey(keyId: string, stored: string): string {
    return this.sealer.open(keyContext(keyId), stored);
  }

  /** What should be stored instead of a key's sealed secret, or undefined when it is sealed with the newest key already. */
  resealedForKey(keyId: string, stored: string): string | undefined {
    return this.resealedIn(keyContext(keyId), stored);
  }

  /** A project's moderation-hook secret (projects.moderation_hook_secret), bound to the project id. */
  sealForProjectHook(projectId: string, secret: string): string {
    return this.sealer.seal(projectHookContext(projectId), secret);
  }

  openForProjectHook(projectId: string, stored: string): string {
    return this.sealer.open(projectHookContext(projectId), stored);
  }

  /** What should be stored instead of a project hook's sealed secret, or undefined when it is sealed with the newest key already. */
  resealedForProjectHook(projectId: string, stored: string): string | undefined {
    return this.resealedIn(projectHookContext(projectId), stored);
  }

  /** A value sealed under `context`, sealed again with the newest key; undefined when it already is. */
  private resealedIn(context: string, stored: string): string | undefined {
    if (!this.sealer.isStale(stored)) return undefined;
    return this.sealer.seal(context, this.sealer.open(context, stored));
  }

  /** What should be stored instead of `stored`, or undefined when it is sealed with the newest key already. */
  resealed(endpointId: string, stored: string): string | undefined {
    if (Sealer.isSealed(stored) && !this.sealer.isStale(stored)) return undefined;
    return this.seal(endpointId, this.open(endpointId, stored));
  }
}

/**
 * Seals the secrets stored in clear (rows from before sealing) and re-seals those sealed with an
 * older key (after CHANNEL_SEALING_KEY=new,old): run at startup by every replica. Each row is
 * written only if it still holds what was read, so replicas racing here (or a rotation of the
 * webhook secret meanwhile) lose nothing. Returns how many rows were rewritten.
 */
export async function resealWebhookSecrets(db: Db, secrets: WebhookSecrets, logger?: Logger): Promise<number> {
  const rows = await db.selectFrom('webhook_endpoints').select(['id', 'secret', 'previous_secret']).execute();
  let rewritten = 0;
  for (const row of rows) {
    try {
      const secret = secrets.resealed(row.id, row.secret);
      const previous = row.previous_secret === null ? undefined : secrets.resealed(row.id, row.previous_secret);
      if (secret === undefined && previous === undefined) continue;
      let update = db
        .updateTable('webhook_endpoints')
        .set({ secret: secret ?? row.secret, previous_secret: previous ?? row.previous_secret })
        .where('id', '=', row.id)
        .where('secret', '=', row.secret);
      update = row.previous_secret === null ? update.where('previous_secret', 'is', null) : update.where('previous_secret', '=', row.previous_secret);
      rewritten += Number((await update.executeTakeFirst()).numUpdatedRows);
    } catch (error) {
      // A key that is not configured (named by its id, never the secret): that endpoint's deliveries fail until it is.
      logger?.error({ endpoint_id: row.id, reason: (error as Error).message }, 'cannot open a webhook secret; it stays as it is');
    }
  }
  // The keys' completion-webhook secrets (always sealed), the same way.
  for (const row of await db.selectFrom('key_webhook_secrets').select(['key_id', 'secret']).execute()) {
    try {
      const secret = secrets.resealedForKey(row.key_id, row.secret);
      if (secret === undefined) continue;
      const update = await db
        .updateTable('key_webhook_secrets')
        .set({ secret })
        .where('key_id', '=', row.key_id)
        .where('secret', '=', row.secret)
        .executeTakeFirst();
      rewritten += Number(update.numUpdatedRows);
    } catch (error) {
      logger?.error({ key_id: row.key_id, reason: (error as Error).message }, 'cannot open a key webhook secret; it stays as it is');
    }
  }
  // The projects' moderation-hook secrets (always sealed), and a rotation's old one, the same way.
  const hooks = await db
    .selectFrom('projects')
    .select(['id', 'moderation_hook_secret', 'moderation_hook_previous_secret'])
    .where('moderation_hook_secret', 'is not', null)
    .execute();
  for (const row of hooks) {
    const stored = row.moderation_hook_secret as string;
    const storedPrevious = row.moderation_hook_previous_secret ?? null;
    try {
      const secret = secrets.resealedForProjectHook(row.id, stored);
      const previous = storedPrevious === null ? undefined : secrets.resealedForProjectHook(row.id, storedPrevious);
      if (secret === undefined && previous === undefined) continue;
      let update = db
        .updateTable('projects')
        .set({ moderation_hook_secret: secret ?? stored, moderation_hook_previous_secret: previous ?? storedPrevious })
        .where('id', '=', row.id)
        .where('moderation_hook_secret', '=', stored);
      update =
        storedPrevious === null
          ? update.where('moderation_hook_previous_secret', 'is', null)
          : update.where('moderation_hook_previous_secret', '=', storedPrevious);
      const result = await update.executeTakeFirst();
      rewritten += Number(result.numUpdatedRows);
    } catch (error) {
      logger?.error({ project_id: row.id, reason: (error as Error).message }, 'cannot open a moderation hook secret; it stays as it is');
    }
  }
  return rewritten;
}
