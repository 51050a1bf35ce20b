import { createHash } from 'node:crypto';
import busboy from 'busboy';
import type { Request, RequestHandler } from 'express';
import { ApiError } from '../../errors/api-error';
import { jsonBody, refuseNul } from '../../http/base-app';
import type { OpenApiDocument } from '../../http/openapi-document';
import { type DeclaredLayer, operationsOf } from '../../http/spec-router';
import { LARGEST_PROMPT_CHARS } from '../../providers/model-spec';
import { GATEWAY_INPUT_LIMITS, inputOverGatewayBound, inputsOverTotal } from './input-limits';

/** The files of a multipart request, by the body object the validator and the handler see. */
export interface UploadedFiles {
  images: Buffer[];
  mask?: Buffer;
}

const uploads = new WeakMap<object, UploadedFiles>();

/**
 * The files a multipart body carried. In the body itself each file is its digest (`sha256:<hex>`):
 * the validator checks the fields, the idempotency layer fingerprints the bytes, and no copy of the
 * bytes goes through either.
 */
export function uploadedFiles(body: object): UploadedFiles | undefined {
  return uploads.get(body);
}

const IMAGE_FIELDS = new Set(['image', 'image[]']);
const MAX_FIELDS = 50;
/** A text field's largest value: the longest prompt any model takes, up to 4 bytes a character in UTF-8. */
const MAX_FIELD_BYTES = 4 * LARGEST_PROMPT_CHARS;

/**
 * The `x-image-inputs` layer: bodies of operations that take image inputs, which may be far larger
 * than BODY_LIMIT_BYTES (up to GATEWAY_INPUT_LIMITS.maxBodyBytes). JSON is parsed as jsonBody does,
 * with that limit; `multipart/form-data` (only for operations whose spec declares it) is streamed with
 * busboy: each file counted while it arrives and refused (413) as soon as it passes the per-image or
 * the total byte limit, so an over-limit upload is never buffered whole. Runs after the guard, so
 * nothing is read for an unauthenticated request; what it consumes the spec router's JSON parser skips.
 */
export function imageInputsBody(multipartRoutes: ReadonlySet<string>): RequestHandler {
  const json = jsonBody(GATEWAY_INPUT_LIMITS.maxBodyBytes);
  return (req, res, next) => {
    // Most bodies are JSON: type-is parses the header only for one that may be multipart.
    if (req.headers['content-type']?.toLowerCase().includes('multipart') && req.is('multipart/form-data')) {
      if (!req.route || !multipartRoutes.has(`${req.method} ${String(req.route.path)}`)) {
        next();
        return;
      }
      readMultipart(req).then(
        (body) => {
          req.body = body;
          next();
        },
        (error: unknown) => next(error),
      );
      return;
    }
    json(req, res, next);
  };
}

function readMultipart(req: Request): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        defParamCharset: 'utf8',
        limits: { files: GATEWAY_INPUT_LIMITS.maxImages + 1, fileSize: GATEWAY_INPUT_LIMITS.maxImageBytes, fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES },
      });
    } catch (error) {
      reject(new ApiError('invalid_request', `The multipart body cannot be read: ${(error as Error).message}.`));
      return;
    }
    const fields: Record<string, string> = {};
    const files: UploadedFiles = { images: [] };
    let total = 0;
    // Counted when a part begins: `files.mask` is set only when its stream ends, after busboy announced the next part.
    let masks = 0;
    let failed = false;
    let pending = 0;
    let ended = false;
    const fail = (error: ApiError) => {
      if (failed) return;
      failed = true;
      // Stop parsing: the answer goes out now, and the rest of the body is dropped (unread-body.ts).
      req.unpipe(parser);
      parser.removeAllListeners('file');
      parser.removeAllListeners('field');
      reject(error);
    };
    const finish = () => {
      if (failed || !ended || pending > 0) return;
      const body: Record<string, unknown> = { ...fields };
      if (files.images.length > 0) body.image = files.images.map(digest);
      if (files.mask) body.mask = digest(files.mask);
      uploads.set(body, files);
      resolve(body);
    };
    parser.on('file', (name, stream) => {
      // A body that ends inside a file part errors the file's stream too: unhandled, it would end the process.
      stream.on('error', (error: Error) => fail(new ApiError('invalid_request', `The multipart body cannot be read: ${error.message}.`)));
      const isImage = IMAGE_FIELDS.has(name);
      if (!isImage && name !== 'mask') {
        stream.resume();
        fail(new ApiError('invalid_request', `${name}: this operation takes files only as image (or image[]) and mask.`, { param: name }));
        return;
      }
      if (name === 'mask' && ++masks > 1) {
        stream.resume();
        fail(new ApiError('invalid_request', 'mask: send one mask.', { param: 'mask' }));
        return;
      }
      const param = isImage ? `images[${files.images.length}]` : 'mask';
      const slot = isImage ? files.images.push(Buffer.alloc(0)) - 1 : -1;
      const chunks: Buffer[] = [];
      let size = 0;
      pending += 1;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        total += chunk.length;
        if (total > GATEWAY_INPUT_LIMITS.maxTotalBytes) {
          fail(inputsOverTotal(param));
          return;
        }
        chunks.push(chunk);
      });
      stream.on('limit', () => {
        fail(inputOverGatewayBound(param));
      });
      stream.on('end', () => {
        pending -= 1;
        const bytes = Buffer.concat(chunks, size);
        if (slot >= 0) files.images[slot] = bytes;
        else files.mask = bytes;
        finish();
      });
    });
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) {
        fail(new ApiError('invalid_request', `${name}: longer than ${MAX_FIELD_BYTES} bytes.`, { param: name }));
        return;
      }
      if (IMAGE_FIELDS.has(name) || name === 'mask') {
        fail(new ApiError('invalid_request', `${name}: send the image as a file part (with a filename), not as a text field.`, { param: name }));
        return;
      }
      try {
        refuseNul(name, name);
        refuseNul(value, name);
      } catch (refusal) {
        fail(refusal as ApiError);
        return;
      }
      // One value per field: a repeated one is refused rather than the last silently winning (names in `[]` notation are lists).
      if (Object.hasOwn(fields, name) && !name.endsWith('[]')) {
        fail(new ApiError('invalid_request', `${name}: send this field once.`, { param: name }));
        return;
      }
      fields[name] = value;
    });
    // As the JSON form's `maxItems`: over the gateway's own bound is a malformed request (a model's smaller bound is image_input_unsupported).
    parser.on('filesLimit', () =>
      fail(new ApiError('invalid_request', `image: at most ${GATEWAY_INPUT_LIMITS.maxImages} images and one mask per request.`, { param: 'image' })),
    );
    parser.on('fieldsLimit', () => fail(new ApiError('invalid_request', `At most ${MAX_FIELDS} text fields per request.`)));
    parser.on('error', (error: Error) => fail(new ApiError('invalid_request', `The multipart body cannot be read: ${error.message}.`)));
    parser.on('close', () => {
      ended = true;
      finish();
    });
    req.on('error', (error: Error) => fail(new ApiError('invalid_request', `The request body broke off: ${error.message}.`)));
    req.pipe(parser);
  });
}

function digest(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** `/a/b//` -> `/a/b` (`/` stays): every request asks, and most paths end without one, so no regular expression runs for them. */
function withoutTrailingSlashes(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.replace(/(.)\/+$/, '$1') : path;
}

/** Express's `:id` path of an OpenAPI template. */
const expressPathOf = (template: string) => template.replace(/\{([^}]+)\}/g, ':$1');

/**
 * What a listener needs for the operations of `document` that declare `x-image-inputs`: the layer
 * (spec-router.ts mounts it, after the guard) and their larger body limit for the body guard.
 */
export function imageInputsSupport(document: OpenApiDocument): { layer: DeclaredLayer; bodyLimitFor: (req: Request) => number | undefined } {
  const operations = operationsOf(document).filter((operation) => operation.spec['x-image-inputs'] === true);
  const multipart = new Set(
    operations
      .filter((operation) => Object.keys((operation.spec.requestBody as { content?: object } | undefined)?.content ?? {}).includes('multipart/form-data'))
      .map((operation) => `${operation.method.toUpperCase()} ${expressPathOf(operation.path)}`),
  );
  const paths = new Set(operations.map((operation) => operation.path));
  return {
    layer: { stage: 'before-validation', handler: imageInputsBody(multipart) },
    bodyLimitFor: (req) => (paths.has(withoutTrailingSlashes(req.path)) ? GATEWAY_INPUT_LIMITS.maxBodyBytes : undefined),
  };
}
