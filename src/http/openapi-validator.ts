import { createHash } from 'node:crypto';
import * as OpenApiValidator from 'express-openapi-validator';
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { ApiError } from '../errors/api-error';
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
  return [...layers.filter((layer) => !LEFT_OUT_LAYERS.has(layer.name)), readableRefusals as unknown as RequestHandler];
}

/** What the library's 400 carries: one entry per failed rule (the first is answered). */
interface ValidatorRefusal {
  status?: number;
  errors?: Array<{ path?: string; message?: string; errorCode?: string }>;
}

/** A schema as the dereferenced document holds it, with the keywords the walk below reads. */
type SchemaNode = {
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  additionalProperties?: SchemaNode | boolean;
  allOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  anyOf?: SchemaNode[];
  'x-message'?: string;
};
type OperationNode = {
  parameters?: Array<{ name: string; in: string; schema?: SchemaNode }>;
  requestBody?: { content?: Record<string, { schema?: SchemaNode }> };
};

/** The rules whose own wording (a regular expression, a list of values) says little: a schema's `x-message` words them instead. */
const WORDED_KEYWORDS = new Set(['pattern', 'enum', 'const', 'format']);
const LOCATIONS: Record<string, string> = { body: 'body', query: 'query', params: 'path', path: 'path', headers: 'header' };

/**
 * The validator's 400 as the gateway words it: `param` names the field as the docs do (`images[0]`,
 * `metadata.team`), and a field whose schema carries `x-message` next to its pattern or enum gets that
 * sentence instead of the rule itself (`must match pattern "^…$"`), so the wording lives with the rule.
 */
const readableRefusals: ErrorRequestHandler = (err: unknown, req, _res, next): void => {
  const refusal = err as ValidatorRefusal | undefined;
  const first = refusal?.status === 400 ? refusal.errors?.[0] : undefined;
  if (!first || err instanceof ApiError) {
    next(err);
    return;
  }
  const [location = '', ...segments] = (first.path ?? '').split('/').filter(Boolean);
  const inRequest = LOCATIONS[location] !== undefined;
  const field = inRequest ? segments : [location, ...segments].filter(Boolean);
  const param = field.length > 0 ? paramName(field) : null;
  const keyword = first.errorCode?.split('.')[0] ?? '';
  const worded = WORDED_KEYWORDS.has(keyword) && inRequest ? schemaAt(req, LOCATIONS[location]!, segments)?.['x-message'] : undefined;
  const detail = worded ?? first.message ?? 'invalid request';
  next(new ApiError('invalid_request', param ? `${param}: ${detail}` : detail, { param }));
};

/** `['images', '0']` -> `images[0]`; `['metadata', 'team']` -> `metadata.team`. */
export function paramName(segments: readonly string[]): string {
  return segments.reduce((name, segment) => (/^\d+$/.test(segment) ? `${name}[${segment}]` : name ? `${name}.${segment}` : segment), '');
}

/** The schema a failed value was checked against: the operation's parameter or body schema, walked down `segments`. */
function schemaAt(req: Request, location: string, segments: readonly string[]): SchemaNode | undefined {
  const operation = (req as Request & { openapi?: { schema?: OperationNode } }).openapi?.schema;
  if (!operation) return undefined;
  if (location !== 'body') {
    const [name, ...rest] = segments;
    const parameter = operation.parameters?.find((p) => p.in === location && p.name.toLowerCase() === name?.toLowerCase());
    return walk(parameter?.schema, rest);
  }
  const content = operation.requestBody?.content ?? {};
  const type = Object.keys(content).find((media) => req.is(media)) ?? Object.keys(content)[0];
  return walk(type === undefined ? undefined : content[type]?.schema, segments);
}

function walk(schema: SchemaNode | undefined, segments: readonly string[]): SchemaNode | undefined {
  let node = schema;
  for (const segment of segments) {
    node = node === undefined ? undefined : child(node, segment);
  }
  return node;
}

function child(node: SchemaNode, segment: string): SchemaNode | undefined {
  const own = node.properties?.[segment] ?? (/^\d+$/.test(segment) ? node.items : undefined);
  if (own) return own;
  for (const branch of [...(node.allOf ?? []), ...(node.oneOf ?? []), ...(node.anyOf ?? [])]) {
    const found = child(branch, segment);
    if (found) return found;
  }
  return typeof node.additionalProperties === 'object' ? node.additionalProperties : undefined;
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
