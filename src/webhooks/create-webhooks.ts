import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { CredentialSealer } from '../channels/channel-sealing';
import type { GatewayConfig } from '../config/config';
import type { Database } from '../db/schema';
import type { Clock } from '../shared/clock';
import type { CursorCodec } from '../shared/cursor';
import { WebhookDispatcher } from './dispatcher';
import { resealWebhookSecrets, WebhookSecrets } from './secret-sealing';
import { WebhooksService } from './webhooks.service';

/**
 * The webhooks feature: signing secrets resealed under the current key, the outbox's dispatcher
 * started, and the /admin/webhooks service that wakes it.
 */
export async function createWebhooks(
  config: GatewayConfig,
  deps: { db: Kysely<Database>; clock: Clock; logger: Logger; sealer: CredentialSealer; cursors: CursorCodec },
): Promise<{ secrets: WebhookSecrets; dispatcher: WebhookDispatcher; admin: WebhooksService; close: () => Promise<void> }> {
  const { db, clock, logger } = deps;
  const secrets = new WebhookSecrets(deps.sealer);
  const dispatcher = new WebhookDispatcher({ db, clock, logger, secrets, ...config.webhooks });
  await resealWebhookSecrets(db, secrets, logger);
  dispatcher.start();
  const admin = new WebhooksService(db, clock, config.webhooks.allowPrivateNetworks, secrets, deps.cursors, () => dispatcher.poke());
  return { secrets, dispatcher, admin, close: () => dispatcher.stop() };
}
