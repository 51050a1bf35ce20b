import { type Command, InvalidArgumentError, Option } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { callAdminApi, callAdminApiText } from '../admin-client';
import { pageOptions, timestamp, withQuery } from '../options';
import { printPage } from '../output';
import type { CommandContext } from '../command-context';

type Schemas = components['schemas'];
type Row = Schemas['UsageReportRow'];

const HOUR_MS = 3_600_000;

/** A whole UTC hour (what the API takes as from / to). */
function wholeHour(value: string): string {
  const iso = timestamp(value);
  if (Date.parse(iso) % HOUR_MS !== 0) throw new InvalidArgumentError('must be a whole UTC hour (2026-11-01T00:00:00Z)');
  return iso;
}

interface UsageOptions {
  from?: string;
  to?: string;
  bucket?: string;
  groupBy?: string;
  key?: string;
  owner?: string;
  project?: string;
  model?: string;
  provider?: string;
  channel?: string;
  metadata?: string;
  order?: string;
  limit?: number;
  cursor?: string;
  csv?: boolean;
}

/** `usage`: usage analytics (getUsageReport): a table, --json, or --csv. */
export function registerUsageCommands(program: Command, context: CommandContext): void {
  pageOptions(
    program
      .command('usage')
      .description('usage analytics: credits, images, requests, failures and latency per group (a table; --json for the API answer, --csv for CSV)')
      .option('--from <time>', "start, a whole UTC hour (default: the API's, the start of --to's calendar month, UTC)", wholeHour)
      .option('--to <time>', "end (exclusive), a whole UTC hour (default: the API's, the end of the current hour)", wholeHour)
      .addOption(new Option('--bucket <bucket>', 'also group by time').choices(['hour', 'day', 'month']))
      .option('--group-by <list>', 'comma-separated: key, owner, project, model, provider, channel, metadata.<name>')
      .option('--key <id>', 'only this key (key_...)')
      .option('--owner <owner>', 'only keys of this owner')
      .option('--project <id>', 'only keys in this project now (prj_...)')
      .option('--model <model>', 'only this model')
      .option('--provider <provider>', 'only this provider')
      .option('--channel <id>', 'only this channel (chn_...)')
      .option('--metadata <name:value>', 'only keys with this metadata entry')
      .addOption(new Option('--order <order>', 'row order').choices(['bucket', 'credits_desc', 'requests_desc', 'images_desc']))
      .option('--csv', "print the API's CSV (Accept: text/csv)"),
    'rows',
  ).action(async (options: UsageOptions, command: Command) => {
    // A bound not given is not sent: the range defaults are the API's (one home for them).
    const route = withQuery(gatewayOperations.getUsageReport.path, {
      from: options.from,
      to: options.to,
      bucket: options.bucket,
      group_by: options.groupBy,
      key_id: options.key,
      owner: options.owner,
      project_id: options.project,
      model: options.model,
      provider: options.provider,
      channel_id: options.channel,
      metadata: options.metadata,
      order: options.order,
      limit: options.limit,
      cursor: options.cursor,
    });
    const connection = context.connection(command);
    if (options.csv) {
      const { text, headers } = await callAdminApiText(connection, route, 'text/csv');
      process.stdout.write(text);
      const next = headers.get('x-next-cursor');
      if (next) process.stderr.write(`more: --cursor ${next}\n`);
      return;
    }
    const page = await callAdminApi<Schemas['UsageReport']>(connection, 'GET', route);
    const grouped = (name: keyof Row) => page.data.some((row) => row[name] !== undefined);
    const metadataNames = [...new Set(page.data.flatMap((row) => Object.keys(row.metadata ?? {})))];
    const columns: Array<[string, (row: Row) => unknown]> = [
      ...(grouped('bucket_start') ? [['bucket', (row: Row) => row.bucket_start] as [string, (row: Row) => unknown]] : []),
      ...(['key_id', 'owner', 'project_id', 'model', 'provider', 'channel_id'] as const)
        .filter(grouped)
        .map((name) => [name, (row: Row) => row[name]] as [string, (row: Row) => unknown]),
      ...metadataNames.map((name) => [`metadata.${name}`, (row: Row) => row.metadata?.[name]] as [string, (row: Row) => unknown]),
      ['requests', (row) => row.requests],
      ['ok', (row) => row.succeeded],
      ['failed', (row) => row.failed],
      ['canceled', (row) => row.canceled],
      ['blocked', (row) => row.blocked],
      ['images', (row) => row.images_delivered],
      ['credits', (row) => row.credits_charged],
      ['p50_ms', (row) => row.latency_ms.p50],
      ['p95_ms', (row) => row.latency_ms.p95],
      ['p99_ms', (row) => row.latency_ms.p99],
      [
        'failures',
        (row) =>
          Object.entries(row.failures)
            .map(([code, count]) => `${code}=${count}`)
            .join(' '),
      ],
    ];
    printPage(context.output(command), page, columns);
  });
}
