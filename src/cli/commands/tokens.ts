import type { Command } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { fillPath } from '../../http/operation-path';
import { callAdminApi } from '../admin-client';
import { commaList, idCommand, pageOptions, timestamp, wholeNumber, withQuery } from '../options';
import { print, printPage, record } from '../output';
import type { CommandContext } from '../command-context';

type Schemas = components['schemas'];
type AdminToken = Schemas['AdminToken'];
type CreatedAdminToken = Schemas['CreatedAdminToken'];

/** A token's fields; a new token's secret after them, with the reminder that it is shown once. */
function showToken(token: AdminToken & { token?: string }): string {
  const fields = record({
    id: token.id,
    name: token.name,
    status: token.status,
    hint: token.hint,
    scopes: token.scopes,
    created_by: token.created_by,
    expires_at: token.expires_at,
    created_at: token.created_at,
    revoked_at: token.revoked_at,
  });
  return token.token === undefined ? fields : `${fields}\n\ntoken: ${token.token}\n(shown only now: store it; use it as ADMIN_TOKEN)`;
}

/** `tokens ...`: scoped admin tokens (createAdminToken, listAdminTokens, getAdminToken, revokeAdminToken). */
export function registerTokenCommands(program: Command, context: CommandContext): void {
  const tokens = program.command('tokens').description('create, inspect and revoke scoped admin tokens (hyadm_...)');

  tokens
    .command('create')
    .description('issue an admin token with some scopes (its secret is printed once)')
    .requiredOption('--name <name>', 'what the token is for')
    .requiredOption(
      '--scopes <list>',
      'comma-separated: keys:read, keys:write, channels:read, channels:write, generations:read, generations:write, webhooks:read, webhooks:write, audit:read, usage:read, tokens:write, projects:read, projects:write',
      commaList('scope'),
    )
    .option('--expires-in-days <n>', 'expire the token after this many days', wholeNumber)
    .option('--expires-at <time>', 'expire the token at this time (ISO 8601)', timestamp)
    .action(async (options: { name: string; scopes: string[]; expiresInDays?: number; expiresAt?: string }, command: Command) => {
      if (options.expiresInDays !== undefined && options.expiresAt !== undefined)
        command.error('error: give --expires-in-days or --expires-at, not both', { exitCode: 2 });
      const body: Schemas['CreateAdminTokenRequest'] = {
        name: options.name,
        scopes: options.scopes as Schemas['AdminScope'][],
        ...(options.expiresInDays === undefined ? {} : { expires_in_days: options.expiresInDays }),
        ...(options.expiresAt === undefined ? {} : { expires_at: options.expiresAt }),
      };
      const created = await callAdminApi<CreatedAdminToken>(context.connection(command), 'POST', gatewayOperations.createAdminToken.path, body);
      print(context.output(command), created, () => showToken(created));
    });

  pageOptions(
    tokens
      .command('list')
      .description('list admin tokens, newest first (a table; --json for the API answer)')
      .option('--status <status>', 'active, revoked or expired'),
    'tokens',
  ).action(async (options: { status?: string; limit?: number; cursor?: string }, command: Command) => {
    const page = await callAdminApi<Schemas['AdminTokenList']>(
      context.connection(command),
      'GET',
      withQuery(gatewayOperations.listAdminTokens.path, { status: options.status, limit: options.limit, cursor: options.cursor }),
    );
    printPage(context.output(command), page, [
      ['id', (t) => t.id],
      ['name', (t) => t.name],
      ['status', (t) => t.status],
      ['scopes', (t) => t.scopes],
      ['hint', (t) => t.hint],
      ['expires', (t) => t.expires_at],
      ['created', (t) => t.created_at],
    ]);
  });

  const byId = [
    { name: 'get', description: 'show one admin token', operation: gatewayOperations.getAdminToken },
    {
      name: 'revoke',
      description: 'revoke an admin token (refused from its next request on; the record is kept)',
      operation: gatewayOperations.revokeAdminToken,
    },
  ];
  for (const { name, description, operation } of byId) {
    idCommand(tokens, name, description, 'token id (adt_...)', async (id, command) => {
      const token = await callAdminApi<AdminToken>(context.connection(command), operation.method.toUpperCase(), fillPath(operation.path, { id }));
      print(context.output(command), token, () => showToken(token));
    });
  }
}
