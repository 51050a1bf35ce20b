import type { ProviderDescriptor } from '../../providers/descriptor';

/**
 * What an operator needs to create a channel of each wire format, read from the provider registry
 * (src/providers/formats.ts FORMATS): `channels create --help` and the generated section of
 * docs/operators/channels.md. Only types are imported here: the CLI loads the registry (and the
 * clients it pulls in) when the help is shown, never at start.
 */
export interface TransportFacts {
  transport: string;
  title: string;
  /** The providers it serves; empty for the generic format (the operator names the provider). */
  providers: readonly string[];
  credentials: ReadonlyArray<{ name: string; secret: boolean; variable?: string }>;
  /** undefined: `base_url` is required. */
  defaultBaseUrl?: string;
  example: { provider: string; model: string; baseUrl?: string };
}

/** The formats that take API channels (those with credentials), in registry order. */
export function transportFacts(formats: readonly ProviderDescriptor[]): TransportFacts[] {
  return formats.flatMap((descriptor) => {
    if (descriptor.credentials === undefined) return [];
    const row = descriptor.catalog?.[0];
    const provider = row?.provider ?? descriptor.providers[0] ?? 'openai-compatible';
    return [
      {
        transport: descriptor.format,
        title: descriptor.title,
        providers: descriptor.providers,
        credentials: descriptor.credentials.fields.map((field) => ({
          name: field.name,
          secret: field.secret,
          variable: descriptor.environment?.credentials[field.name],
        })),
        defaultBaseUrl: descriptor.defaultBaseUrl,
        example: {
          provider,
          model: row?.model ?? 'my-model',
          baseUrl: descriptor.defaultBaseUrl === undefined ? 'https://images.example.com/v1' : undefined,
        },
      },
    ];
  });
}

const shellVariable = (facts: TransportFacts, field: string) =>
  facts.credentials.find((c) => c.name === field)?.variable ?? `${facts.transport.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_${field.toUpperCase()}`;

/** The `channels create` command of the example: credentials from environment variables (or stdin for other shapes). */
export function cliExample(facts: TransportFacts): string {
  const names = facts.credentials.map((c) => c.name).join(',');
  const credentials =
    names === 'api_key'
      ? `--api-key-env ${shellVariable(facts, 'api_key')}`
      : names === 'access_key_id,secret_access_key'
        ? `--access-key-id-env ${shellVariable(facts, 'access_key_id')} --secret-access-key-env ${shellVariable(facts, 'secret_access_key')}`
        : '--credentials-stdin';
  const { provider, model, baseUrl } = facts.example;
  return [
    'creative-gateway channels create',
    `--name ${facts.transport}-2`,
    `--provider ${provider}`,
    `--transport ${facts.transport}`,
    `--model ${model}`,
    ...(baseUrl ? [`--base-url ${baseUrl}`] : []),
    credentials,
  ].join(' ');
}

function providersText(facts: TransportFacts): string {
  return facts.providers.length > 0 ? facts.providers.join(', ') : 'the one you name (OPENAI_COMPAT_PROVIDER_NAME or a catalog entry)';
}

function credentialsText(facts: TransportFacts): string {
  return facts.credentials.map((c) => `${c.name}${c.secret ? ' (secret)' : ''}`).join(', ');
}

/** The text after `channels create --help`'s options. */
export function transportsHelp(formats: readonly ProviderDescriptor[]): string {
  const lines = ['', 'Transports (--transport), from the provider registry:'];
  for (const facts of transportFacts(formats)) {
    lines.push(
      `  ${facts.transport}: ${facts.title.replace(/`/g, '')}`,
      `    providers: ${providersText(facts)}`,
      `    credentials: ${credentialsText(facts)}`,
      `    base URL: ${facts.defaultBaseUrl ?? 'required (--base-url)'}`,
      `    e.g. ${cliExample(facts)}`,
    );
  }
  return lines.join('\n');
}

const cell = (text: string) => text.replace(/\|/g, '\\|');

/** The generated section of docs/operators/channels.md: a table, then one example per transport. */
export function transportsMarkdown(formats: readonly ProviderDescriptor[]): string {
  const all = transportFacts(formats);
  const rows = all.map((facts) =>
    [
      `\`${facts.transport}\``,
      cell(facts.title),
      cell(providersText(facts)),
      facts.credentials.map((c) => `\`${c.name}\`${c.secret ? ' (secret)' : ''}`).join(', '),
      facts.defaultBaseUrl === undefined ? 'required' : `\`${facts.defaultBaseUrl}\``,
      facts.credentials.map((c) => (c.variable ? `\`${c.variable}\`` : '')).join(', ') || 'none',
    ].join(' | '),
  );
  const examples = all.map((facts) => {
    const credentials = `{${facts.credentials.map((c) => `"${c.name}": "'"$${shellVariable(facts, c.name)}"'"`).join(', ')}}`;
    const body = [
      `"name": "${facts.transport}-2", "provider": "${facts.example.provider}", "transport": "${facts.transport}"`,
      `"models": [{"model": "${facts.example.model}"}]${facts.example.baseUrl ? `, "base_url": "${facts.example.baseUrl}"` : ''}`,
      `"credentials": ${credentials}`,
    ];
    return [
      `# ${facts.transport}`,
      `curl -s localhost:8080/admin/channels -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{`,
      `  ${body.join(',\n  ')}}'`,
      `npx ${cliExample(facts)}`,
    ].join('\n');
  });
  return [
    '| transport | what it speaks | providers | credentials | base URL | environment account |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows.map((row) => `| ${row} |`),
    '',
    'One channel of each (`$ADMIN` holds the admin secret or a token with `channels:write`; the variables',
    'hold the credentials: the CLI reads them from the environment, never from its command line):',
    '',
    '```sh',
    examples.join('\n'),
    '```',
  ].join('\n');
}
