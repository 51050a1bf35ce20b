// `npm run fake-upstreams`: a fake of every registered wire format that calls an upstream (the fakes of
// format-fakes.ts, each speaking its upstream's real wire format), so every provider's path can be
// tried without credentials. Prints the environment that points a gateway's accounts at them.
import { FORMATS } from '../../src/providers/formats';
import { FORMAT_FAKES, type RunningFormatFake } from './format-fakes';

export interface FakeUpstreams {
  /** Per format, its running fake. */
  fakes: ReadonlyArray<{ format: string } & RunningFormatFake>;
  /** Every fake's environment together: what `npm start` needs. */
  env: Record<string, string>;
  /** Registered formats without a fake (none while the conformance test holds). */
  missing: string[];
  close(): Promise<void>;
}

/** Starts the fake of every format of the registry that calls an upstream. */
export async function startFakeUpstreams(pollIntervalMs = 200): Promise<FakeUpstreams> {
  const formats = FORMATS.filter((descriptor) => !descriptor.offline).map((descriptor) => descriptor.format);
  const missing = formats.filter((format) => FORMAT_FAKES[format] === undefined);
  const fakes: Array<{ format: string } & RunningFormatFake> = [];
  for (const format of formats) {
    const start = FORMAT_FAKES[format];
    if (start) fakes.push({ format, ...(await start()) });
  }
  const env: Record<string, string> = {};
  for (const fake of fakes) Object.assign(env, fake.env);
  // One poll interval for all (each fake's own is a test's).
  env.UPSTREAM_POLL_INTERVAL_MS = String(pollIntervalMs);
  // The fakes listen on loopback and hand out image URLs there: a private upstream, refused by default.
  env.CHANNEL_ALLOW_PRIVATE_UPSTREAMS = 'true';
  return { fakes, env, missing, close: async () => void (await Promise.all(fakes.map((fake) => fake.close()))) };
}

const shellQuote = (value: string) => (/^[\w@%+=:,./-]*$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`);

async function main(): Promise<void> {
  const upstreams = await startFakeUpstreams();
  const variables = Object.entries(upstreams.env).map(([name, value]) => `  ${name}=${shellQuote(value)}`);
  console.log(`Fake upstreams running: ${upstreams.fakes.map((fake) => fake.format).join(', ')}.
Start the gateway with:

${variables.join(' \\\n')} \\
  npm start

Then a key allowing these providers can use these models:
${upstreams.fakes.map((fake) => `  ${fake.format}: model ${fake.model} (provider ${fake.provider}, size ${fake.size})`).join('\n')}
${upstreams.missing.length > 0 ? `\nNo fake for: ${upstreams.missing.join(', ')}.\n` : ''}
Prompts may carry scenario tokens (test/fakes/scenario.ts): [code:50411] [post-code:50511] [busy:2] [pending:3] [slow:5000] [garbage].
Ctrl-C stops them.`);
  const stop = () => void upstreams.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (require.main === module) void main();
