import type { Command } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { callAdminApi } from '../admin-client';
import { pageOptions, timestamp, withQuery } from '../options';
import { printPage } from '../output';
import type { CommandContext } from '../command-context';

type Schemas = components['schemas'];

/** `audit list`: the admin audit trail (listAuditEvents). */
export function registerAuditCommands(program: Command, context: CommandContext): void {
  const audit = program.command('audit').description('read the audit trail of admin changes');

  pageOptions(
    audit
      .command('list')
      .description('list audit events, newest first (a table; --json for the API answer, with before/after)')
      .option('--actor <actor>', '"root" or an admin token id (adt_...)')
      .option('--target <id>', 'the id of what was changed (key_..., adt_..., ...)')
      .option('--action <action>', 'e.g. key.updated, admin_token.created')
      .option('--created-after <time>', 'recorded at or after this time (ISO 8601)', timestamp)
      .option('--created-before <time>', 'recorded before this time (ISO 8601)', timestamp),
    'events',
  ).action(
    async (
      options: { actor?: string; target?: string; action?: string; createdAfter?: string; createdBefore?: string; limit?: number; cursor?: string },
      command: Command,
    ) => {
      const query = {
        actor: options.actor,
        target: options.target,
        action: options.action,
        created_after: options.createdAfter,
        created_before: options.createdBefore,
        limit: options.limit,
        cursor: options.cursor,
      };
      const page = await callAdminApi<Schemas['AuditEventList']>(context.connection(command), 'GET', withQuery(gatewayOperations.listAuditEvents.path, query));
      printPage(context.output(command), page, [
        ['time', (e) => e.created_at],
        ['actor', (e) => e.actor],
        ['action', (e) => e.action],
        ['target', (e) => e.target],
        ['client_ip', (e) => e.client_ip],
        ['request_id', (e) => e.request_id],
      ]);
    },
  );
}
