import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { ApiError } from '../errors/api-error';
import type { GatewayHandlers } from '../http/handler-maps';
import type { StoredImagesTable } from '../db/schema';
import type { Clock } from '../shared/clock';
import type { ByteRange } from './image-store';
import type { ImagesService } from './images.service';

type ImageHandlers = Pick<GatewayHandlers, 'getImage'>;

/**
 * `GET /images/{image_id}` (getImage): a signed URL, so no API key; a binary body streamed from
 * the store, hence a `raw` handler. The spec router has already validated the parameters.
 */
export function imageHandlers(images: ImagesService, clock: Clock): ImageHandlers {
  return {
    getImage: {
      raw: async (req, res) => {
        const { image_id: imageId } = res.locals.parsedParams as { image_id: string };
        const { expires, signature } = res.locals.parsedQuery as { expires: number; signature: string };
        const row = await images.open(imageId, expires, signature);
        const etag = `"${row.sha256}"`;
        // Cacheable (the URL itself is the capability) until the URL expires, never beyond. Set
        // only on answers about the image: refusals keep the default no-store.
        const maxAge = Math.max(0, Math.min(expires, Math.floor(row.expires_at / 1000)) - Math.floor(clock.now() / 1000));
        const validators = () => {
          res.setHeader('ETag', etag);
          res.setHeader('Cache-Control', `public, max-age=${maxAge}, immutable`);
        };
        if (matchesEtag(req.get('If-None-Match'), etag)) {
          validators();
          res.status(304).end();
          return;
        }
        const range = requestedRange(req, row, etag);
        const stream = await images.read(row, range);
        validators();
        res.setHeader('Last-Modified', new Date(row.created_at).toUTCString());
        res.setHeader('Accept-Ranges', 'bytes');
        // Embeddable with <img> from any origin, even on pages that set COEP.
        res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
        res.setHeader('Content-Type', row.content_type);
        if (range) {
          res.status(206);
          res.setHeader('Content-Range', `bytes ${range.first}-${range.last}/${row.byte_size}`);
          res.setHeader('Content-Length', String(range.last - range.first + 1));
        } else {
          res.status(200);
          res.setHeader('Content-Length', String(row.byte_size));
        }
        if (req.method === 'HEAD') {
          stream.destroy();
          res.end();
          return;
        }
        await sendStream(stream, res);
      },
    },
  };
}

async function sendStream(stream: NodeJS.ReadableStream, res: Response): Promise<void> {
  try {
    await pipeline(stream, res);
  } catch {
    // Headers are gone: a client that left, or a store that failed mid-body, can only be cut off.
    res.destroy();
  }
}

/** RFC 9110 13.1.2: weak comparison; `*` matches any current representation. */
function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, '');
    return tag === '*' || tag === etag;
  });
}

/**
 * One `bytes=` range (RFC 9110 14.2), or undefined to send the whole image: no Range header, an
 * If-Range that no longer matches, several ranges (allowed: the full body is a valid answer),
 * another unit, or a malformed spec (ignored, as the RFC says). A range wholly past the end is 416.
 */
function requestedRange(req: Request, row: StoredImagesTable, etag: string): ByteRange | undefined {
  const header = req.get('Range');
  if (!header) return undefined;
  const ifRange = req.get('If-Range');
  if (ifRange !== undefined && ifRange.trim() !== etag) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const size = row.byte_size;
  const unsatisfiable = () =>
    new ApiError('range_not_satisfiable', `The image has ${size} bytes; the requested range ${header} lies outside it.`, {
      headers: { 'Content-Range': `bytes */${size}` },
    });
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0) throw unsatisfiable();
    return { first: Math.max(0, size - suffix), last: size - 1 };
  }
  const first = Number(match[1]);
  const last = match[2] === '' ? Number.POSITIVE_INFINITY : Number(match[2]);
  if (last < first) return undefined;
  if (first >= size) throw unsatisfiable();
  return { first, last: Math.min(last, size - 1) };
}
