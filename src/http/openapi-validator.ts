import { createHash } from 'node:crypto';
import * as OpenApiValidator from 'express-openapi-validator';
import type { RequestHandler } from 'express';
import { parseRfc3339 } from '../shared/rfc3339';
import type { OpenApiDocument } from './openapi-document';

/**
 * Checks every request (and, when asked, every response) against the spec. Auth runs
 * before it, so the error codes for keys stay ours; it answers 400/404/405/415 through the
 * central error handler.
 *
 * patches/express-openapi-validator+*.patch (applied on install by patch-package) caches the
 * compiled route matchers, which upstream rebuilds on every request (about 10% of the gateway's CPU
 * per generation; upstream PR cdimascio/express-openapi-validator#1217). It also makes starting
 * cheap, which every test that boots a gateway pays: each request and response schema is compiled
 * without the whole dereferenced document attached when the schema holds no `$ref` (ajv walked the
 * entire inlined API on every compile), a response schema when its status is first answered, and the
 * OpenAPI schema only when `validateApiSpec` asks for the check. test/http/response-validation.test.ts
 * shows responses are still checked. Drop the patch once upstream has these (docs/maintainers/framework-seams.md,
 * seam 1, says which are proposed upstream and how to redo the patch on an upgrade).
 */
export function openApiValidator(document: OpenApiDocument, validateResponses: boolean): RequestHandler[] {
  // The layers hold nothing of one app: a process that starts several gateways on the same document
  // (the tests, the bench) compiles its schemas once.
  const key = `${validateResponses} ${createHash('sha256').update(JSON.stringify(document)).digest('base64')}`;
  let layers = validatorLayers.get(key);
  if (!layers) {
    layers = createValidatorLayers(document, validateResponses);
    validatorLayers.set(key, layers);
  }
  return layers;
}

const validatorLayers = new Map<string, RequestHandler[]>();

function createValidatorLayers(document: OpenApiDocument, validateResponses: boolean): RequestHandler[] {
  const layers = OpenApiValidator.middleware({
    apiSpec: structuredClone(document) as never,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
    validateResponses: validateResponses ? { coerceTypes: false, removeAdditional: false } : false,
    // Our own auth middlewares check credentials (with our error codes) before the validator runs.
    validateSecurity: false,
    // date-time is RFC 3339 as rfc3339.ts reads it (lowercase t/z, offsets, fractions, leap seconds;
    // no 30 February), so the validator and every service agree on what a timestamp is.
    formats: { 'date-time': { type: 'string', validate: (value: string) => parseRfc3339(value) !== null } },
    ignoreUndocumented: false,
    // The documents are the files shipped with this build; test/unit/openapi-documents.test.ts checks
    // them against the OpenAPI schema with this library's own validator, so every start need not.
    validateApiSpec: false,
    // Multipart bodies (image inputs) are read by our own layer (src/images/inputs/multipart-body.ts);
    // without this the library would parse them again with multer.
    fileUploader: false,
    // The default mode skips validating a shared $ref'd file (upstream issue #906).
    $refParser: { mode: 'dereference' },
  }) as unknown as RequestHandler[];
  return layers.filter((layer) => !LEFT_OUT_LAYERS.has(layer.name));
}

/**
 * The library's layers left out, found by their function names (docs/maintainers/framework-seams.md).
 * With validateSecurity off, the security layer only calls next() (one more layer and promise hop on
 * every request). The path-params layer installs `app.param` overrides on the first app it sees (and
 * only that one, which the layers shared between apps would make uneven); they put the validator's
 * decoding of a path parameter in req.params, where the router already put the same value (both
 * decodeURIComponent).
 */
export const LEFT_OUT_LAYERS: ReadonlySet<string> = new Set(['securityMiddleware', 'pathParamsMiddleware']);
