import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { gatewayOperations } from '../../generated/gateway.operations';
import type { Database, StoredImagesTable } from '../db/schema';
import type { WriteTransactions } from '../db/write-transactions';
import { ApiError } from '../errors/api-error';
import { fillPath } from '../http/operation-path';
import type { ProviderImage } from '../providers/provider';
import type { Clock } from '../shared/clock';
import { newSortableId } from '../shared/ids';
import { type ImageContentType, type ImageHeader, type StoredImageContentType, readBase64ImageHeader, readImageHeader, sniffImageType } from './image-bytes';
import { type FetchLimits, HostAllowList, fetchUpstreamImage } from './image-fetch';
import type { ByteRange, ImageStore } from './image-store';
import type { ImageUrlSigner } from './image-url-signer';
import { urlProblem } from '../shared/safe-url';
import {
  expireGenerationImages,
  findExpiredImageIds,
  findOwnedImage,
  findStoredImage,
  type ImageOwner,
  insertStoredImages,
  markImagesDeleted,
  ownerColumns,
  purgeImageTombstones,
} from './images.repository';

/** How long a swept image's row stays, so URLs on replicas with lagging clocks still answer 410. */
const TOMBSTONE_MS = 86_400_000;

export interface ImagesDeps {
  db: Kysely<Database>;
  writes: WriteTransactions;
  clock: Clock;
  logger: Logger;
  store: ImageStore;
  signer: ImageUrlSigner;
  /** How long an image is kept; its URLs expire with it. */
  retentionMs: number;
  limits: FetchLimits;
  /** Per provider name, the hosts its image URLs may point at. */
  hostsByProvider: ReadonlyMap<string, HostAllowList>;
  /** Scheme, host and port clients reach this gateway at (no trailing slash); may be set after listening. */
  publicBaseUrl?: string;
  /** CHANNEL_ALLOW_PRIVATE_UPSTREAMS: upstreams live on the gateway's network, so they reach it at a private address too. */
  upstreamsArePrivate?: boolean;
}

export interface PersistRequest {
  generationId: string;
  /** Who may name the stored images as inputs: the generation's key or service client. */
  owner: ImageOwner;
  provider: string;
  images: ProviderImage[];
  responseFormat: 'url' | 'b64_json';
  /**
   * Store b64_json images too. A synchronous b64_json answer hands the bytes over and keeps
   * nothing; a caller that answers later (the asynchronous API's worker) sets this.
   */
  keepBase64?: boolean;
  /** Told the ids of the image rows stored, once their rows exist: what this run withdraws if it does not deliver them. */
  onStored?: (imageIds: string[]) => void;
}

const EMPTY = Buffer.alloc(0);

/** An image to store, with what its row records. */
export interface StoredImageBytes {
  bytes: Buffer;
  contentType: StoredImageContentType;
  role: StoredImagesTable['role'];
  position: number;
  width: number;
  height: number;
}

/** `bytes` is empty for base64 images that are only checked, not kept. */
interface TakenImage {
  bytes: Buffer;
  contentType: ImageContentType;
  /** The size its header declares: what is delivered, whatever size was asked or the upstream reported. */
  header?: ImageHeader;
}

/**
 * Stable image URLs: every image a provider produced is fetched once (from its URL, on the
 * provider's own hosts only, or decoded from its base64), checked to be a PNG, JPEG or WebP within
 * the size bound, stored, and answered as the gateway's own signed URL (or base64: see
 * `keepBase64`). Called once per
 * generation after the provider answered; it throws ApiError when an image cannot be taken, so the
 * generation fails and is released like any provider failure. No request state: a background
 * worker can call it the same way.
 */
export class ImagesService {
  private publicBaseUrl: string | undefined;

  constructor(private readonly deps: ImagesDeps) {
    this.publicBaseUrl = deps.publicBaseUrl;
  }

  /** For a gateway that learns its own address only once it listens (PUBLIC_BASE_URL unset). */
  usePublicBaseUrl(url: string): void {
    this.publicBaseUrl ??= url.replace(/\/+$/, '');
  }

  get store(): ImageStore {
    return this.deps.store;
  }

  async persist(request: PersistRequest, signal: AbortSignal): Promise<ProviderImage[]> {
    const kept = !(request.responseFormat === 'b64_json' && !request.keepBase64);
    const taken = await Promise.all(request.images.map((image) => this.take(request.provider, image, signal, !kept)));
    const base64 = (i: number) => request.images[i]?.b64Json ?? (taken[i] as TakenImage).bytes.toString('base64');
    const sizeOf = (i: number) => {
      const header = (taken[i] as TakenImage).header;
      return header ? { width: header.width, height: header.height } : { width: request.images[i]?.width ?? 0, height: request.images[i]?.height ?? 0 };
    };
    // The client of a synchronous b64_json request already holds the bytes: checked, not kept.
    if (!kept) return taken.map((_, i) => ({ b64Json: base64(i), ...sizeOf(i) }));
    const rows = await this.keep(request.generationId, request.owner, taken, sizeOf, request.onStored);
    return rows.map((row, i) => ({ ...(request.responseFormat === 'b64_json' ? { b64Json: base64(i) } : { url: this.signedUrl(row) }), ...sizeOf(i) }));
  }

  private async keep(
    generationId: string,
    owner: ImageOwner,
    taken: TakenImage[],
    sizeOf: (i: number) => { width: number; height: number },
    onStored?: (imageIds: string[]) => void,
  ): Promise<StoredImagesTable[]> {
    return this.storeImages(
      generationId,
      owner,
      taken.map(({ bytes, contentType }, position) => ({ bytes, contentType, role: 'output', position, ...sizeOf(position) })),
      'The generated images could not be stored; nothing was charged. Try again later.',
      onStored,
    );
  }

  /** Stores a request's input images (and mask) under the generation that takes them, with the same retention as outputs. */
  async keepInputs(generationId: string, owner: ImageOwner, images: StoredImageBytes[]): Promise<StoredImagesTable[]> {
    return this.storeImages(generationId, owner, images, 'The input images could not be stored; nothing was charged. Try again later.');
  }

  private async storeImages(
    generationId: string,
    owner: ImageOwner,
    images: StoredImageBytes[],
    refusal: string,
    onStored?: (imageIds: string[]) => void,
  ): Promise<StoredImagesTable[]> {
    const { clock, retentionMs, store, writes, logger } = this.deps;
    const now = clock.now();
    const rows: StoredImagesTable[] = images.map(({ bytes, contentType, role, position, width, height }) => ({
      id: newSortableId('img', now),
      generation_id: generationId,
      position,
      role,
      ...ownerColumns(owner),
      content_type: contentType,
      byte_size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      width,
      height,
      created_at: now,
      expires_at: now + retentionMs,
      deleted_at: null,
    }));
    // Rows first: the sweeper then knows every object that may exist, even if a put below fails.
    // One multi-row INSERT is atomic by itself: on PostgreSQL it goes without BEGIN/COMMIT (one round trip).
    await writes.single((db) => insertStoredImages(db, rows));
    onStored?.(rows.map((row) => row.id));
    try {
      await Promise.all(rows.map((row, i) => store.put(row.id, (images[i] as StoredImageBytes).bytes, row.content_type as StoredImageContentType)));
    } catch (error) {
      logger.error({ err: error, generation_id: generationId, store: store.description }, 'could not store images');
      throw new ApiError('image_storage_unavailable', refusal);
    }
    return rows;
  }

  /** A live image of `owner`'s generations (for `img_` inputs); undefined for another's, an unknown or an expired one. */
  async findOwned(imageId: string, owner: ImageOwner): Promise<StoredImagesTable | undefined> {
    return findOwnedImage(this.deps.db, imageId, owner, this.deps.clock.now());
  }

  /** A stored image that is still kept (not past its retention, not swept). */
  async findStored(imageId: string): Promise<StoredImagesTable | undefined> {
    const row = await findStoredImage(this.deps.db, imageId);
    return row && row.deleted_at === null && Number(row.expires_at) > this.deps.clock.now() ? row : undefined;
  }

  /** A stored image's whole bytes (inputs are bounded: at most GATEWAY_INPUT_LIMITS.maxImageBytes). */
  async readBytes(row: StoredImagesTable): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of await this.read(row)) chunks.push(Buffer.from(chunk as Buffer));
    return Buffer.concat(chunks);
  }

  /**
   * Why upstreams could not fetch this gateway's image URLs, or undefined: PUBLIC_BASE_URL unset
   * (the address learnt when listening is this host's), or a loopback, private or link-local address;
   * both are fine when the operator declares its upstreams private (CHANNEL_ALLOW_PRIVATE_UPSTREAMS).
   */
  publicUrlProblem(): string | undefined {
    const configured = this.deps.publicBaseUrl;
    // Upstreams on the gateway's own network (CHANNEL_ALLOW_PRIVATE_UPSTREAMS) reach it at any address it serves on.
    if (this.deps.upstreamsArePrivate) return this.publicBaseUrl ? undefined : 'the gateway does not know its address yet';
    if (!configured) return 'PUBLIC_BASE_URL is not set';
    const problem = urlProblem(configured, false);
    return problem ? `PUBLIC_BASE_URL (${configured}) ${problem}` : undefined;
  }

  /**
   * The image's bytes, from its base64 or its URL, refused unless a PNG, JPEG or WebP within the bound.
   * `checkOnly`: the base64 goes back to the client as it came, so only its first bytes are decoded (to
   * sniff the type) and its size is computed from its length: no decoded copy of the payload.
   */
  private async take(provider: string, image: ProviderImage, signal: AbortSignal, checkOnly = false): Promise<TakenImage> {
    const { limits, hostsByProvider } = this.deps;
    const refuse = (why: string) => new ApiError('provider_error', `Provider ${provider} returned an image the gateway could not take: ${why}.`);
    let bytes: Buffer;
    if (image.b64Json !== undefined) {
      // base64 is 4/3 of the bytes: refuse before decoding something absurd.
      if (image.b64Json.length > Math.ceil(limits.maxBytes / 3) * 4 + 4) throw refuse(`it is larger than ${limits.maxBytes} bytes`);
      if (checkOnly) {
        if (Buffer.byteLength(image.b64Json, 'base64') > limits.maxBytes) throw refuse(`it is larger than ${limits.maxBytes} bytes`);
        const contentType = sniffImageType(Buffer.from(image.b64Json.slice(0, 32), 'base64'));
        if (!contentType) throw refuse('it is not a PNG, JPEG or WebP image');
        return { bytes: EMPTY, contentType, header: readBase64ImageHeader(image.b64Json) };
      }
      bytes = Buffer.from(image.b64Json, 'base64');
    } else if (image.url !== undefined) {
      const configured = hostsByProvider.get(provider);
      const allowed = image.sourceHost === undefined ? configured : (configured ?? new HostAllowList([])).with(image.sourceHost);
      if (!allowed) throw refuse('the provider has no image hosts configured');
      bytes = await fetchUpstreamImage(provider, image.url, allowed, limits, signal);
    } else {
      throw refuse('it has neither a URL nor base64 data');
    }
    if (bytes.length > limits.maxBytes) throw refuse(`it is larger than ${limits.maxBytes} bytes`);
    const contentType = sniffImageType(bytes);
    if (!contentType) throw refuse('it is not a PNG, JPEG or WebP image');
    return { bytes, contentType, header: readImageHeader(bytes) };
  }

  /** The gateway's own URL for a stored image, valid until the image expires. */
  signedUrl(row: Pick<StoredImagesTable, 'id' | 'expires_at'>): string {
    if (!this.publicBaseUrl) throw new Error('ImagesService: no public base URL yet');
    const expires = Math.floor(row.expires_at / 1000);
    const query = new URLSearchParams({ expires: String(expires), signature: this.deps.signer.sign(row.id, expires) });
    return `${this.publicBaseUrl}${fillPath(gatewayOperations.getImage.path, { image_id: row.id })}?${query}`;
  }

  /**
   * The image a signed URL names, or the refusal: a wrong signature 403, an expired URL or image
   * 410, an image never stored 404. The signature is checked first, so nothing is revealed
   * about ids without one.
   */
  async open(imageId: string, expires: number, signature: string): Promise<StoredImagesTable> {
    const now = this.deps.clock.now();
    if (!this.deps.signer.verify(imageId, expires, signature)) {
      throw new ApiError('invalid_signature', 'The image URL signature is not valid: use the URL exactly as the gateway returned it.', { param: 'signature' });
    }
    const expired = () => new ApiError('image_expired', 'This image URL has expired and the image is no longer kept; generate the image again.');
    if (expires * 1000 <= now) throw expired();
    const row = await findStoredImage(this.deps.db, imageId);
    if (!row) throw new ApiError('image_not_found', `No image ${imageId}.`);
    if (row.expires_at <= now || row.deleted_at !== null) throw expired();
    return row;
  }

  /**
   * Takes back the images of a generation that will not deliver them (settled elsewhere while it
   * ran): their URLs answer 410 from now on and the sweeper deletes the bytes. `imageIds`: only
   * those (a run's own: another run of the generation may have delivered its own).
   */
  async withdraw(generationId: string, imageIds?: readonly string[]): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.writes.run((trx) => expireGenerationImages(trx, generationId, now, imageIds));
  }

  /** The stored bytes; 410 when the store no longer has them (swept meanwhile). */
  async read(row: StoredImagesTable, range?: ByteRange): Promise<Readable> {
    let stream: Readable | undefined;
    try {
      stream = await this.deps.store.read(row.id, range);
    } catch (error) {
      this.deps.logger.error({ err: error, image_id: row.id, store: this.deps.store.description }, 'could not read a stored image');
      throw new ApiError('image_storage_unavailable', 'The image store does not answer; try again later.');
    }
    if (!stream) throw new ApiError('image_expired', 'This image is no longer kept; generate the image again.');
    return stream;
  }

  /**
   * Deletes the bytes of images past their expiry and marks their rows (tombstones, dropped a day
   * later); returns how many. Safe with several replicas sweeping: deletes are idempotent.
   */
  async sweep(): Promise<number> {
    const { db, store, clock } = this.deps;
    const now = clock.now();
    let deleted = 0;
    for (;;) {
      const ids = await findExpiredImageIds(db, now, 200);
      for (const id of ids) await store.delete(id);
      await markImagesDeleted(db, ids, now);
      deleted += ids.length;
      if (ids.length < 200) break;
    }
    await purgeImageTombstones(db, now - TOMBSTONE_MS);
    return deleted;
  }
}
