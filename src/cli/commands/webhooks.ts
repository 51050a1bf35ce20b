import type { Command } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { fillPath } from '../../http/operation-path';
import { callAdminApi } from '../admin-client';
import { commaList, defined, enableDisable, idCommand, pageOptions, requireChange, wholeNumber, withQuery } from '../options';
import { print, printDeleted, printPage, record } from '../output';
import type { CommandContext } from '../command-context';

type Schemas = components['schemas'];
type Endpoint = Schemas['WebhookEndpoint'];
type EventType = Schemas['EventType'];

const EVENTS_HELP =
  'comma-separated event types: key.quota.threshold_reached, key.quota.exhausted, project.quota.threshold_reached, project.quota.exhausted, key.expiring, key.expired, key.disabled, channel.auto_disabled, webhook.test';

/** An endpoint's fields; a new or rotated signing secret after them, shown once. */
function showEndpoint(endpoint: Endpoint & { secret?: string }): string {
  const fields = record({
    id: endpoint.id,
    url: endpoint.url,
    description: endpoint.description,
    event_types: endpoint.event_types,
    status: endpoint.status,
    disabled_reason: endpoint.disabled_reason,
    disabled_at: endpoint.disabled_at,
    failing_since: endpoint.failing_since,
    previous_secret_expires_at: endpoint.previous_secret_expires_at,
    created_at: endpoint.created_at,
    updated_at: endpoint.updated_at,
  });
  return endpoint.secret === undefined ? fields : `${fields}\n\nsecret: ${endpoint.secret}\n(shown only now: store it to verify signatures)`;
}

const endpointPath = (id: string) => fillPath(gatewayOperations.getWebhookEndpoint.path, { id });

/** `webhooks ...`: every webhook endpoint operation of openapi/gateway.yaml. */
export function registerWebhookCommands(program: Command, context: CommandContext): void {
  const webhooks = program.command('webhooks').description('manage webhook endpoints and inspect their deliveries');

  webhooks
    .command('create')
    .description('add an endpoint (its signing secret is printed once)')
    .requiredOption('--url <url>', 'http(s) URL that receives the POSTs')
    .requiredOption('--events <list>', EVENTS_HELP, commaList('event type'))
    .option('--description <text>', 'what the endpoint is for')
    .action(async (options: { url: string; events: string[]; description?: string }, command: Command) => {
      const body: Schemas['CreateWebhookEndpointRequest'] = {
        url: options.url,
        event_types: options.events as EventType[],
        ...defined({ description: options.description }),
      };
      const created = await callAdminApi<Schemas['WebhookEndpointWithSecret']>(
        context.connection(command),
        'POST',
        gatewayOperations.createWebhookEndpoint.path,
        body,
      );
      print(context.output(command), created, () => showEndpoint(created));
    });

  webhooks
    .command('list')
    .description('list endpoints (a table; --json for the API answer)')
    .action(async (_options: unknown, command: Command) => {
      const list = await callAdminApi<Schemas['WebhookEndpointList']>(context.connection(command), 'GET', gatewayOperations.listWebhookEndpoints.path);
      printPage(context.output(command), list, [
        ['id', (e) => e.id],
        ['url', (e) => e.url],
        ['status', (e) => e.status],
        ['events', (e) => e.event_types],
        ['failing_since', (e) => e.failing_since],
        ['description', (e) => e.description],
      ]);
    });

  webhooks
    .command('update')
    .description('change an endpoint: URL, events, description, or enable/disable it')
    .argument('<id>', 'endpoint id (whep_...)')
    .option('--url <url>', 'new URL')
    .option('--events <list>', EVENTS_HELP, commaList('event type'))
    .option('--description <text>', 'new description')
    .option('--enable', 'enable the endpoint (also one the gateway disabled)')
    .option('--disable', 'disable the endpoint')
    .action(async (id: string, options: { url?: string; events?: string[]; description?: string; enable?: boolean; disable?: boolean }, command: Command) => {
      const body: Schemas['UpdateWebhookEndpointRequest'] = {
        ...defined({ url: options.url, event_types: options.events as EventType[] | undefined, description: options.description }),
        ...enableDisable(command, options, 'enabled'),
      };
      requireChange(command, body);
      const endpoint = await callAdminApi<Endpoint>(context.connection(command), 'PATCH', endpointPath(id), body);
      print(context.output(command), endpoint, () => showEndpoint(endpoint));
    });

  webhooks
    .command('rotate-secret')
    .description('replace the signing secret (printed once); the old one still signs for the overlap')
    .argument('<id>', 'endpoint id (whep_...)')
    .option('--overlap-seconds <n>', 'how long the old secret still signs (default 86400)', wholeNumber)
    .action(async (id: string, options: { overlapSeconds?: number }, command: Command) => {
      const body: Schemas['RotateWebhookSecretRequest'] = defined({ overlap_seconds: options.overlapSeconds });
      const rotated = await callAdminApi<Schemas['WebhookEndpointWithSecret']>(
        context.connection(command),
        'POST',
        fillPath(gatewayOperations.rotateWebhookSecret.path, { id }),
        body,
      );
      print(context.output(command), rotated, () => showEndpoint(rotated));
    });

  pageOptions(
    webhooks
      .command('deliveries')
      .description("list an endpoint's deliveries, newest first (a table; --json for the API answer with the attempt log)")
      .argument('<id>', 'endpoint id (whep_...)')
      .option('--status <status>', 'pending, succeeded or failed'),
    'deliveries',
  ).action(async (id: string, options: { status?: string; limit?: number; cursor?: string }, command: Command) => {
    const route = withQuery(fillPath(gatewayOperations.listWebhookDeliveries.path, { id }), {
      status: options.status,
      limit: options.limit,
      cursor: options.cursor,
    });
    const list = await callAdminApi<Schemas['WebhookDeliveryList']>(context.connection(command), 'GET', route);
    printPage(context.output(command), list, [
      ['id', (d) => d.id],
      ['event', (d) => d.event_type],
      ['status', (d) => d.status],
      ['attempts', (d) => d.attempts],
      ['last_status', (d) => d.last_status_code],
      ['last_error', (d) => d.last_error],
      ['created', (d) => d.created_at],
    ]);
  });

  idCommand(webhooks, 'get', 'show one endpoint', 'endpoint id (whep_...)', async (id, command) => {
    const endpoint = await callAdminApi<Endpoint>(context.connection(command), 'GET', endpointPath(id));
    print(context.output(command), endpoint, () => showEndpoint(endpoint));
  });

  idCommand(webhooks, 'delete', 'delete an endpoint', 'endpoint id (whep_...)', async (id, command) => {
    await callAdminApi<undefined>(context.connection(command), 'DELETE', fillPath(gatewayOperations.deleteWebhookEndpoint.path, { id }));
    printDeleted(context.output(command), id);
  });

  idCommand(webhooks, 'test', 'queue a webhook.test event to the endpoint; prints its event id', 'endpoint id (whep_...)', async (id, command) => {
    const queued = await callAdminApi<{ event_id: string }>(context.connection(command), 'POST', fillPath(gatewayOperations.sendTestWebhook.path, { id }));
    print(context.output(command), queued, () => `queued ${queued.event_id} (see: webhooks deliveries ${id})`);
  });
}
