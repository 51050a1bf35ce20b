import type { Kysely } from 'kysely';
import { BUILT_IN_PROVIDERS, resultHostsOf } from '../providers/formats';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/config';
import type { Database } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import type { Clock } from '../shared/clock';
import { DirectoryImageStore } from './directory-image-store';
import { HostAllowList } from './image-fetch';
import type { ImageStore } from './image-store';
import { ImageUrlSigner } from './image-url-signer';
import { ImagesService } from './images.service';

export async function createImageStore(store: GatewayConfig['images']['store']): Promise<ImageStore> {
  if (store.kind === 's3') {
    const { kind: _kind, ...settings } = store;
    // Loaded only when chosen: the AWS SDK costs ~250 ms and ~20 MB RSS at startup.
    const { S3ImageStore } = await import('./s3-image-store');
    return new S3ImageStore(settings);
  }
  return new DirectoryImageStore(store.directory, store.timeoutMs);
}

/**
 * Each provider's image URLs may point at its documented result hosts (its descriptors' `resultHosts`),
 * the operator's hosts for every provider (IMAGE_FETCH_ALLOWED_HOSTS) and for it (PROVIDER_<NAME>_IMAGE_HOSTS),
 * all over https, and at its environment accounts' own base URL hosts (with their scheme).
 */
export function imageHostsByProvider(config: GatewayConfig): Map<string, HostAllowList> {
  const { providers, images } = config;
  const own: Record<string, Set<string>> = Object.fromEntries(BUILT_IN_PROVIDERS.map((name) => [name, new Set<string>()]));
  for (const account of providers.accounts) {
    own[account.provider] ??= new Set();
    if (account.baseUrl) own[account.provider]!.add(new URL(account.baseUrl).host);
  }
  return new Map(
    Object.entries(own).map(([name, hosts]) => [
      name,
      new HostAllowList([...resultHostsOf(name), ...images.allowedHosts, ...(providers.imageHosts[name] ?? [])], hosts),
    ]),
  );
}

export async function createImagesService(
  config: GatewayConfig,
  deps: { db: Kysely<Database>; writes: WriteTransactions; clock: Clock; logger: Logger },
): Promise<ImagesService> {
  const { images } = config;
  return new ImagesService({
    ...deps,
    store: await createImageStore(images.store),
    signer: new ImageUrlSigner(images.signingKey),
    retentionMs: images.retentionMs,
    limits: { maxBytes: images.maxBytes, timeoutMs: images.fetchTimeoutMs, allowPrivate: config.channels.allowPrivateUpstreams },
    hostsByProvider: imageHostsByProvider(config),
    publicBaseUrl: images.publicBaseUrl,
    upstreamsArePrivate: config.channels.allowPrivateUpstreams,
  });
}
