import fs from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import type { components, operations } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { fillPath } from '../../http/operation-path';
import { ApiCallError, UsageError, callAdminApi } from '../admin-client';
import { type Clearable, defined, enableDisable, idCommand, integer, orClear, repeatable, requireChange, wholeNumber, withQuery } from '../options';
import { print, printDeleted, printPage, record } from '../output';
import type { CommandContext } from '../command-context';
import { transportsHelp } from './channels-transports';

type Schemas = components['schemas'];
type Channel = Schemas['Channel'];
type ChannelModel = Schemas['ChannelModel'];

/** `--model jimeng-4.5` or `--model jimeng-4.5=doubao-seedream-4-5-custom` (catalog model = upstream model id). */
function channelModel(value: string): ChannelModel {
  const [model, upstream, ...rest] = value.split('=');
  if (!model || rest.length > 0 || upstream === '') throw new InvalidArgumentError('must be <model> or <model>=<upstream model>');
  return upstream === undefined ? { model } : { model, upstream_model: upstream };
}

/** A shared limit: a whole number, or "none" for no cap. */
const channelLimit = orClear('none', wholeNumber);

interface CredentialOptions {
  credentialsStdin?: boolean;
  apiKeyEnv?: string;
  accessKeyIdEnv?: string;
  secretAccessKeyEnv?: string;
}

function fromEnv(variable: string): string {
  const value = process.env[variable];
  if (!value) throw new UsageError(`environment variable ${variable} is not set`);
  return value;
}

/**
 * The channel's credentials, never from argv (it shows in `ps`): a JSON object on stdin
 * (--credentials-stdin), or environment variables named by --api-key-env / --access-key-id-env and
 * --secret-access-key-env. Undefined when no credential option is given.
 */
function readCredentials(options: CredentialOptions): Schemas['ChannelCredentials'] | undefined {
  const fromVariables = options.apiKeyEnv !== undefined || options.accessKeyIdEnv !== undefined || options.secretAccessKeyEnv !== undefined;
  if (options.credentialsStdin && fromVariables) throw new UsageError('give --credentials-stdin or the --*-env options, not both');
  if (options.credentialsStdin) {
    const text = fs.readFileSync(0, 'utf8');
    try {
      return JSON.parse(text) as Schemas['ChannelCredentials'];
    } catch {
      throw new UsageError('stdin must hold the credentials as JSON, e.g. {"api_key":"..."} or {"access_key_id":"...","secret_access_key":"..."}');
    }
  }
  if (options.apiKeyEnv !== undefined) {
    if (options.accessKeyIdEnv !== undefined || options.secretAccessKeyEnv !== undefined)
      throw new UsageError(
        '--api-key-env is for transports whose credential is an api_key; --access-key-id-env/--secret-access-key-env for an access key pair (visual): not both',
      );
    return { api_key: fromEnv(options.apiKeyEnv) };
  }
  if (options.accessKeyIdEnv !== undefined || options.secretAccessKeyEnv !== undefined) {
    if (options.accessKeyIdEnv === undefined || options.secretAccessKeyEnv === undefined)
      throw new UsageError('--access-key-id-env and --secret-access-key-env go together');
    return { access_key_id: fromEnv(options.accessKeyIdEnv), secret_access_key: fromEnv(options.secretAccessKeyEnv) };
  }
  return undefined;
}

/** The options createChannel and updateChannel share (credentials, models, routing and limits). */
function channelOptions(command: Command): Command {
  return command
    .option('--credentials-stdin', 'read the credentials as JSON from stdin: {"api_key":"..."} or {"access_key_id":"...","secret_access_key":"..."}')
    .option('--api-key-env <VAR>', 'read the api_key (every transport but visual: see Transports below) from this environment variable')
    .option('--access-key-id-env <VAR>', 'read the access_key_id (visual) from this environment variable')
    .option('--secret-access-key-env <VAR>', 'read the secret_access_key (visual) from this environment variable')
    .option('--model <model[=upstream]>', 'a catalog model it serves, optionally with the upstream model id (repeat for more)', repeatable(channelModel))
    .option('--base-url <url>', "the upstream's base URL (default: the transport's public endpoint; see Transports below)")
    .option('--priority <n>', 'tier: higher tiers are tried first (-1000..1000)', integer)
    .option('--weight <n>', 'share of traffic within its tier (1..1000)', wholeNumber)
    .option('--max-concurrency <n>', 'calls in flight at once, across replicas ("none" for no cap)', channelLimit)
    .option('--rpm <n>', 'calls started per rolling minute ("none" for no cap)', channelLimit)
    .option('--ipm <n>', 'images per rolling minute ("none" for no cap)', channelLimit)
    .option('--timeout-ms <n>', 'deadline of one call (100..600000)', wholeNumber)
    .addHelpText(
      'after',
      '\nCredentials are never taken from the command line (it shows in `ps`): pipe JSON into --credentials-stdin or name environment variables.',
    );
}

interface ChannelOptions extends CredentialOptions {
  model?: ChannelModel[];
  baseUrl?: string;
  priority?: number;
  weight?: number;
  maxConcurrency?: Clearable<number>;
  rpm?: Clearable<number>;
  ipm?: Clearable<number>;
  timeoutMs?: number;
}

function channelFields(options: ChannelOptions) {
  return defined({
    models: options.model,
    base_url: options.baseUrl,
    priority: options.priority,
    weight: options.weight,
    max_concurrency: options.maxConcurrency,
    rpm: options.rpm,
    ipm: options.ipm,
    timeout_ms: options.timeoutMs,
    credentials: readCredentials(options),
  });
}

function showChannel(channel: Channel): string {
  return record({
    id: channel.id,
    name: channel.name,
    provider: channel.provider,
    transport: channel.transport,
    base_url: channel.base_url,
    models: channel.models.map((m) => (m.upstream_model ? `${m.model}=${m.upstream_model}` : m.model)),
    priority: channel.priority,
    weight: channel.weight,
    status: channel.status,
    disabled_reason: channel.disabled_reason,
    disabled_at: channel.disabled_at,
    max_concurrency: channel.max_concurrency,
    rpm: channel.rpm,
    ipm: channel.ipm,
    timeout_ms: channel.timeout_ms,
    credentials_hint: channel.credentials_hint,
    source: channel.source,
    created_at: channel.created_at,
    updated_at: channel.updated_at,
  });
}

const channelPath = (id: string) => fillPath(gatewayOperations.getChannel.path, { id });

/** `channels ...`: every channel (upstream account) operation of openapi/gateway.yaml. */
export function registerChannelCommands(program: Command, context: CommandContext): void {
  const channels = program.command('channels').description('manage upstream accounts (channels): models, priorities, weights, limits');

  channelOptions(
    channels
      .command('create')
      .description('add an upstream account')
      .requiredOption('--name <name>', 'what the account is')
      .requiredOption('--provider <provider>', 'the provider it serves (e.g. jimeng)')
      .requiredOption('--transport <transport>', 'its wire format: one of the Transports below'),
  )
    .option('--disabled', 'create it disabled')
    // The list is read from the provider registry when the help is shown: loading it (and the clients it pulls in) at start would slow every command.
    .addHelpText('after', () => transportsHelp((require('../../providers/formats') as typeof import('../../providers/formats')).FORMATS))
    .action(async (options: ChannelOptions & { name: string; provider: string; transport: string; disabled?: boolean }, command: Command) => {
      if (options.model === undefined) command.error("error: required option '--model <model[=upstream]>' not specified", { exitCode: 2 });
      const fields = channelFields(options);
      if (fields.credentials === undefined)
        command.error('error: give the credentials: --credentials-stdin, --api-key-env or --access-key-id-env with --secret-access-key-env', { exitCode: 2 });
      const body = {
        ...fields,
        name: options.name,
        provider: options.provider,
        transport: options.transport,
        ...(options.disabled ? { status: 'disabled' } : {}),
      } as Schemas['CreateChannelRequest'];
      const channel = await callAdminApi<Channel>(context.connection(command), 'POST', gatewayOperations.createChannel.path, body);
      print(context.output(command), channel, () => showChannel(channel));
    });

  channels
    .command('list')
    .description('list channels (a table; --json for the API answer)')
    .option('--provider <provider>', 'only this provider')
    .option('--status <status>', 'enabled, disabled or auto_disabled')
    .action(async (options: { provider?: string; status?: string }, command: Command) => {
      const list = await callAdminApi<{ data: Channel[] }>(
        context.connection(command),
        'GET',
        withQuery(gatewayOperations.listChannels.path, { provider: options.provider, status: options.status }),
      );
      printPage(context.output(command), list, [
        ['id', (c) => c.id],
        ['name', (c) => c.name],
        ['provider', (c) => c.provider],
        ['transport', (c) => c.transport],
        ['status', (c) => c.status],
        ['priority', (c) => c.priority],
        ['weight', (c) => c.weight],
        ['models', (c) => c.models.map((m) => m.model)],
        ['source', (c) => c.source],
      ]);
    });

  channelOptions(
    channels
      .command('update')
      .description('change a channel; --enable also re-enables an auto-disabled one')
      .argument('<id>', 'channel id (chn_...)')
      .option('--name <name>', 'new name'),
  )
    .option('--enable', 'enable the channel')
    .option('--disable', 'disable the channel')
    .action(async (id: string, options: ChannelOptions & { name?: string; enable?: boolean; disable?: boolean }, command: Command) => {
      const body = {
        ...channelFields(options),
        ...defined({ name: options.name }),
        ...enableDisable(command, options, 'enabled'),
      } as Schemas['UpdateChannelRequest'];
      requireChange(command, body);
      const channel = await callAdminApi<Channel>(context.connection(command), 'PATCH', channelPath(id), body);
      print(context.output(command), channel, () => showChannel(channel));
    });

  idCommand(channels, 'get', 'show one channel (never its credentials)', 'channel id (chn_...)', async (id, command) => {
    const channel = await callAdminApi<Channel>(context.connection(command), 'GET', channelPath(id));
    print(context.output(command), channel, () => showChannel(channel));
  });

  idCommand(channels, 'delete', 'delete a channel', 'channel id (chn_...)', async (id, command) => {
    await callAdminApi<undefined>(context.connection(command), 'DELETE', fillPath(gatewayOperations.deleteChannel.path, { id }));
    printDeleted(context.output(command), id);
  });

  channels
    .command('test')
    .description('call the upstream once through the channel; a passing test re-enables an auto-disabled channel')
    .argument('<id>', 'channel id (chn_...)')
    .option('--model <model>', 'the catalog model to try (default: its first)')
    .action(async (id: string, options: { model?: string }, command: Command) => {
      type TestBody = NonNullable<operations['testChannel']['requestBody']>['content']['application/json'];
      const body: TestBody = defined({ model: options.model });
      const result = await callAdminApi<Schemas['ChannelTestResult']>(
        context.connection(command),
        'POST',
        fillPath(gatewayOperations.testChannel.path, { id }),
        body,
      );
      print(
        context.output(command),
        result,
        () =>
          `${record({ outcome: result.outcome, latency_ms: result.latency_ms, error_code: result.error_code, message: result.message })}\n\n${showChannel(result.channel)}`,
      );
      // The answer is printed either way; a script sees the failed test in the exit code.
      if (result.outcome === 'failed') throw new ApiCallError(`the channel test failed: ${result.error_code ?? 'error'}: ${result.message ?? ''}`.trimEnd());
    });
}
