import { ARK } from './ark/ark.descriptor';
import { BFL } from './bfl/bfl.descriptor';
import { callsFor, type ProviderDescriptor } from './descriptor';
import { FAL } from './fal/fal.descriptor';
import { GEMINI } from './gemini/gemini.descriptor';
import { OPENAI } from './openai/openai.descriptor';
import { findModelSpec, type UpstreamModelSpec } from './model-spec';
import { IMAGES_API } from './images-api/images-api.descriptor';
import { VISUAL } from './jimeng/visual.descriptor';
import { LOCAL } from './local/local.descriptor';

/**
 * Every wire format the gateway speaks, one descriptor each (descriptor.ts). The spec's transport
 * enums and provider names are checked against this list (test/unit/provider-registry.test.ts).
 */
export const FORMATS: readonly ProviderDescriptor[] = [LOCAL, VISUAL, ARK, IMAGES_API, FAL, BFL, OPENAI, GEMINI];

const byFormat = new Map(FORMATS.map((descriptor) => [descriptor.format, descriptor]));

/** The descriptor of a wire format (a channel's or catalog entry's `transport`), if the gateway speaks it. */
export function descriptorOf(format: string): ProviderDescriptor | undefined {
  return byFormat.get(format);
}

/** The descriptor of a format the gateway must speak (a stored channel's, a checked catalog entry's). */
export function requireDescriptor(format: string): ProviderDescriptor {
  const descriptor = byFormat.get(format);
  if (!descriptor) throw new Error(`unknown wire format "${format}" (known: ${[...byFormat.keys()].join(', ')})`);
  return descriptor;
}

/** Provider names known without configuration (a key may allow them before any account exists). */
export const BUILT_IN_PROVIDERS: readonly string[] = [...new Set(FORMATS.flatMap((descriptor) => descriptor.providers))];

const formatsByProvider = new Map<string, readonly ProviderDescriptor[]>();

/** The formats that serve `provider` (the generic one for a provider no descriptor lists); asked on every call, so kept per provider. */
export function formatsOf(provider: string): readonly ProviderDescriptor[] {
  let formats = formatsByProvider.get(provider);
  if (formats === undefined) {
    const listed = FORMATS.filter((descriptor) => descriptor.providers.includes(provider));
    formats = listed.length > 0 ? listed : FORMATS.filter((descriptor) => descriptor.generic);
    // Names come from configuration and trusted callers; bounded all the same.
    if (formatsByProvider.size < 256) formatsByProvider.set(provider, formats);
  }
  return formats;
}

/** The format a catalog entry without `transport` is served over: the one format of its provider; undefined when it has several (the entry must say). */
export function defaultFormatOf(provider: string): ProviderDescriptor | undefined {
  const formats = formatsOf(provider);
  return formats.length === 1 ? formats[0] : undefined;
}

/** The format a catalog entry is served over: its `transport`, else its provider's one format. */
export function formatOfEntry(entry: { provider: string; transport?: string }): ProviderDescriptor | undefined {
  return entry.transport !== undefined ? descriptorOf(entry.transport) : defaultFormatOf(entry.provider);
}

/** The row of its format's model table a catalog entry is served by (its `upstream_family`'s, else its upstream id's); undefined when the table does not know it. */
export function modelSpecOfEntry(entry: {
  provider: string;
  transport?: string;
  upstream_model: string;
  upstream_family?: string;
}): UpstreamModelSpec | undefined {
  const format = formatOfEntry(entry);
  return format && findModelSpec(format.models, entry.upstream_model, entry.upstream_family);
}

/**
 * Upstream calls a request of `n` images for a catalog entry costs: the one rule the failover's
 * split, the task journal and the charges of cancels and disconnects share.
 */
export function callsOfEntry(entry: { provider: string; transport?: string; upstream_model?: string; upstream_family?: string }, n: number): number {
  const format = formatOfEntry(entry);
  if (!format) return 1;
  const spec = entry.upstream_model === undefined ? undefined : modelSpecOfEntry({ ...entry, upstream_model: entry.upstream_model });
  return callsFor(format, n, spec);
}

/** Whether a catalog entry's format sends nothing upstream (the built-in renderer): its cancels cost nothing, a takeover runs it again. */
export function sendsNothingUpstream(entry: { provider: string; transport?: string }): boolean {
  return formatOfEntry(entry)?.offline === true;
}

/**
 * The model family of its format's table a catalog entry serves (its `upstream_family`, else the
 * row of its upstream id): a channel's own id for the model (a BytePlus id, an endpoint `ep-…`) is that family too.
 */
export function familyOfEntry(entry: { provider: string; transport?: string; upstream_model: string; upstream_family?: string }): string | undefined {
  return entry.upstream_family ?? modelSpecOfEntry(entry)?.family;
}

/** How long the upstream of a catalog entry's format keeps an accepted task (descriptor `resume.lifeMs`); undefined when it does not say. */
export function taskLifeOf(entry: { provider: string; transport?: string }): number | undefined {
  return formatOfEntry(entry)?.resume?.lifeMs;
}

/**
 * The format a model outside the catalog (a trusted caller's) is served over, for a provider with
 * several: the one whose table knows the id, else whose `modelIds` match it. Undefined when the
 * provider has one format (the entry needs no `transport`) or none fits.
 */
export function formatForUpstreamModel(provider: string, upstreamModel: string): ProviderDescriptor | undefined {
  const formats = formatsOf(provider);
  if (formats.length <= 1) return undefined;
  return (
    formats.find((descriptor) => findModelSpec(descriptor.models, upstreamModel)) ?? formats.find((descriptor) => descriptor.modelIds?.test(upstreamModel))
  );
}

/** The documented hosts (https) `provider`'s result URLs may be on: its formats' `resultHosts`. */
export function resultHostsOf(provider: string): readonly string[] {
  return [...new Set(formatsOf(provider).flatMap((descriptor) => descriptor.resultHosts))];
}
