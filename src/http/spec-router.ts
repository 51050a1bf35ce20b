import { type Request, type RequestHandler, type Response, Router } from 'express';
import type { Principal } from '../auth/principal';
import { ApiError } from '../errors/api-error';
import { withRateLimitHolder } from '../ratelimit/rate-limit-context';
import { parseTimestamp } from '../shared/rfc3339';
import { abortOnDisconnect } from './abort-on-disconnect';
import { refuseNul } from './base-app';
import type { OpenApiDocument } from './openapi-document';
import type { OperationRequest, OperationResponse, RawOperationHandler } from './operation-types';

/**
 * The one place operations become routes. Everything is read from the spec document: each
 * operation's method and path, its guard (`security`), its parameters, and the cross-cutting
 * behaviour it declares (`x-idempotent`, `x-rate-limited`). Handlers are looked up by operationId;
 * an operation without a handler, or a handler without an operation, stops startup.
 *
 * Per operation, in this order (the order of checks documented in docs/clients/keys-and-accounting.md):
 * guard -> declared layers that must see refusals (rate-limit headers) -> JSON body -> parameter
 * syntax -> spec validator -> declared layers that need a valid request (idempotency) -> handler.
 * Declared layers run in the order of the `layers` table, never in the order an operation lists its
 * extensions (test/http/layer-order.test.ts).
 */

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;
type HttpMethod = (typeof HTTP_METHODS)[number];

/**
 * Establishes one security requirement (all of its schemes) or throws the ApiError that refuses it.
 * `scopes` are the ones the requirement lists (OpenAPI 3.1 allows them on any scheme), e.g.
 * `AdminSecret: [keys:write]`; the guard refuses a principal that does not hold them.
 */
export type Guard = (req: Request, scopes: readonly string[]) => Principal | Promise<Principal>;

/** A layer an operation opts into with an `x-` extension set to true. */
export interface DeclaredLayer {
  /** `before-validation` layers also see requests the validator refuses. */
  stage: 'before-validation' | 'after-validation';
  handler: RequestHandler;
}

/** One row of the layers table: the extension that declares the layer, and the layer. */
export type LayerRow = DeclaredLayer & { extension: `x-${string}` };

export interface SpecRouterOptions {
  /** The bundled document (openapi-document.ts). */
  document: OpenApiDocument;
  /** By operationId. */
  handlers: Record<string, unknown>;
  /** By security requirement: its scheme names sorted and joined with `+` (e.g. `ServiceTokenId+ServiceTokenSecret`). */
  guards: Record<string, Guard>;
  /**
   * The declared layers, in the order they run within their stage for every operation that declares
   * them, whatever the order of the extensions in the spec.
   */
  layers: readonly LayerRow[];
  bodyParser: RequestHandler;
  validator: RequestHandler[];
  /** The message of a 404 (a request no operation's path matches): where the API's reference is. */
  notFoundMessage?: string;
}

interface ParameterSpec {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  schema?: { type?: string; format?: string; minimum?: number; maximum?: number; $ref?: string };
}

interface OperationSpec {
  operationId: string;
  security?: Array<Record<string, string[]>>;
  parameters?: ParameterSpec[];
  requestBody?: unknown;
  [extension: `x-${string}`]: unknown;
}

export interface MountedOperation {
  operationId: string;
  method: HttpMethod;
  path: string;
}

/** OpenAPI's `{id}` path parameters become Express's `:id`. */
function expressPath(template: string): string {
  return template.replace(/\{([^}]+)\}/g, ':$1');
}

/** Follows a local `#/components/...` reference (the bundled document keeps them). */
function resolve<T>(document: OpenApiDocument, node: T | { $ref: string }): T {
  if (node && typeof node === 'object' && '$ref' in node && typeof node.$ref === 'string') {
    const target = node.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((at, part) => (at as Record<string, unknown>)[part], document);
    return resolve(document, target as T);
  }
  return node as T;
}

export function operationsOf(document: OpenApiDocument): Array<MountedOperation & { spec: OperationSpec; parameters: ParameterSpec[] }> {
  const found = [];
  for (const [template, item] of Object.entries(document.paths)) {
    const resolveParameter = (p: ParameterSpec): ParameterSpec => {
      const parameter = resolve(document, p);
      return parameter.schema ? { ...parameter, schema: resolve(document, parameter.schema) } : parameter;
    };
    const shared = ((item.parameters as ParameterSpec[] | undefined) ?? []).map(resolveParameter);
    for (const method of HTTP_METHODS) {
      const spec = item[method] as OperationSpec | undefined;
      if (!spec) continue;
      const own = (spec.parameters ?? []).map(resolveParameter);
      const parameters = [...shared.filter((p) => !own.some((o) => o.name === p.name && o.in === p.in)), ...own];
      found.push({ operationId: spec.operationId, method, path: template, spec, parameters });
    }
  }
  return found;
}

const DECIMAL_INTEGER = /^-?(0|[1-9][0-9]*)$/;
/** A date-time whose offset sign `+` arrived as a space: `+` means space in a form-encoded query. */
const OFFSET_AFTER_SPACE = /^(.*[0-9]) ([0-9]{2}:[0-9]{2})$/;

/**
 * Integers in the query or path are decimal literals inside the documented bounds, and nothing
 * else (`Infinity`, `0x10`, `1e3`, 300 digits are refused). Date-times are RFC 3339 (rfc3339.ts),
 * with an unencoded `+` offset read as written. No value may hold NUL. Returns the converted values.
 */
function parseParameters(parameters: ParameterSpec[], source: Record<string, unknown>, where: 'query' | 'path'): Record<string, unknown> {
  const parsed: Record<string, unknown> = { ...source };
  for (const parameter of parameters) {
    if (parameter.in !== where) continue;
    const raw = source[parameter.name];
    if (raw === undefined) continue;
    if (typeof raw !== 'string') throw new ApiError('invalid_request', `${parameter.name}: give this parameter once.`, { param: parameter.name });
    refuseNul(raw, parameter.name);
    const type = parameter.schema?.type;
    if (type === 'string' && parameter.schema?.format === 'date-time') {
      const value = raw.replace(OFFSET_AFTER_SPACE, '$1+$2');
      parseTimestamp(value, parameter.name);
      parsed[parameter.name] = value;
      continue;
    }
    if (type === 'integer') {
      const value = Number(raw);
      const { minimum, maximum } = parameter.schema ?? {};
      const inBounds = (minimum === undefined || value >= minimum) && (maximum === undefined || value <= maximum);
      if (!DECIMAL_INTEGER.test(raw) || !Number.isSafeInteger(value) || !inBounds) {
        const bounds = minimum !== undefined && maximum !== undefined ? ` from ${minimum} to ${maximum}` : '';
        throw new ApiError('invalid_request', `${parameter.name}: must be a decimal integer${bounds}.`, { param: parameter.name });
      }
      parsed[parameter.name] = value;
    } else if (type === 'boolean') {
      if (raw !== 'true' && raw !== 'false') throw new ApiError('invalid_request', `${parameter.name}: must be true or false.`, { param: parameter.name });
      parsed[parameter.name] = raw === 'true';
    }
  }
  return parsed;
}

const principalOf = (res: Response): Principal => res.locals.principal ?? { kind: 'anonymous' };

function guardFor(operation: { operationId: string; spec: OperationSpec }, document: OpenApiDocument, guards: Record<string, Guard>): RequestHandler {
  const requirements = operation.spec.security ?? (document.security as OperationSpec['security']) ?? [];
  if (requirements.length === 0) {
    return (_req, res, next) => {
      res.locals.principal = { kind: 'anonymous' };
      next();
    };
  }
  const alternatives = requirements.map((requirement) => {
    const name = Object.keys(requirement).sort().join('+');
    const guard = guards[name];
    if (!guard) throw new Error(`${operation.operationId}: no guard for the security requirement ${name}`);
    return { guard, scopes: Object.values(requirement).flat() };
  });
  return async (req, res, next) => {
    // Alternatives (OR): the first that accepts wins. When none does, the first refusal about
    // credentials that were sent answers (a bad Access JWT says why it is bad), else the first one
    // (credentials missing altogether).
    const refusals: unknown[] = [];
    for (const { guard, scopes } of alternatives) {
      try {
        res.locals.principal = await guard(req, scopes);
        next();
        return;
      } catch (error) {
        refusals.push(error);
      }
    }
    throw refusals.find((refusal) => !isMissingCredentials(refusal)) ?? refusals[0];
  };
}

/** Refusals that only say "no credentials of this kind were sent". */
function isMissingCredentials(refusal: unknown): boolean {
  return refusal instanceof ApiError && refusal.code.startsWith('missing_');
}

/** Express's GET routes also answer HEAD; the validator only knows GET, so it is shown GET (docs/maintainers/framework-seams.md, seam 4). */
const showHeadAsGet: RequestHandler = (req, res, next) => {
  if (req.method === 'HEAD') {
    res.locals.headRequest = true;
    req.method = 'GET';
  }
  next();
};
const restoreHead: RequestHandler = (req, res, next) => {
  if (res.locals.headRequest) req.method = 'HEAD';
  next();
};

function adapt(operationId: string, handler: unknown): RequestHandler {
  if (handler && typeof handler === 'object' && 'raw' in handler) return (handler as RawOperationHandler).raw;
  if (typeof handler !== 'function') throw new Error(`${operationId}: the handler is neither a function nor { raw }`);
  const run = handler as (request: OperationRequest<never, Principal>) => Promise<OperationResponse<never>> | OperationResponse<never>;
  return async (req, res) => {
    // Every member a plain value: a getter in this literal (a lazy signal) gave each request an
    // accessor closure that kept finished requests alive through V8's young collections
    // (docs/benchmarks-history.md, "Promoted requests"); a signal costs less than that.
    const request = {
      params: res.locals.parsedParams ?? {},
      query: res.locals.parsedQuery ?? {},
      body: req.body as never,
      principal: principalOf(res),
      requestId: res.locals.requestId,
      clientIp: req.socket.remoteAddress ?? '',
      signal: abortOnDisconnect(res),
      header: (name: string) => req.get(name),
    } as unknown as OperationRequest<never, Principal>;
    const holder = res.locals.rateLimit;
    const response = (await (holder ? withRateLimitHolder(holder, () => run(request)) : run(request))) as {
      status: number;
      body: unknown;
      headers?: Record<string, string>;
      contentType?: string;
    };
    for (const [name, value] of Object.entries(response.headers ?? {})) res.setHeader(name, value);
    res.status(response.status);
    if (response.status === 204) res.end();
    else if (response.contentType) res.type(response.contentType).send(response.body);
    else res.json(response.body);
  };
}

/** Builds the router of one API from its document. Throws when handlers and operations do not match one to one. */
export function specRouter(options: SpecRouterOptions): { router: Router; operations: MountedOperation[] } {
  const { document, handlers, guards, layers } = options;
  const operations = operationsOf(document);
  const ids = new Set(operations.map((o) => o.operationId));
  const unhandled = operations.filter((o) => !(o.operationId in handlers)).map((o) => o.operationId);
  const orphans = Object.keys(handlers).filter((id) => !ids.has(id));
  if (unhandled.length > 0 || orphans.length > 0) {
    throw new Error(`spec and handlers differ: operations without a handler [${unhandled.join(', ')}], handlers without an operation [${orphans.join(', ')}]`);
  }

  const extensions: readonly string[] = layers.map((layer) => layer.extension);
  const repeated = extensions.filter((extension, at) => extensions.indexOf(extension) !== at);
  if (repeated.length > 0) throw new Error(`the layers table lists ${repeated.join(', ')} more than once`);

  const router = Router({ caseSensitive: true, strict: false });
  for (const operation of operations) {
    const declared = Object.entries(operation.spec)
      .filter(([name, value]) => name.startsWith('x-') && value === true)
      .map(([name]) => name);
    for (const name of declared) if (!extensions.includes(name)) throw new Error(`${operation.operationId}: no layer implements ${name}`);
    // Rows of the table, in the table's order: the spec says which layers an operation has, not their order.
    const stage = (which: DeclaredLayer['stage']) => layers.filter((l) => l.stage === which && declared.includes(l.extension)).map((l) => l.handler);
    const parseQuery: RequestHandler = (req, res, next) => {
      const query = req.query as Record<string, unknown>;
      const parsedQuery = parseParameters(operation.parameters, query, 'query');
      res.locals.parsedQuery = parsedQuery;
      res.locals.parsedParams = parseParameters(operation.parameters, req.params, 'path');
      // A date-time whose `+` was read as a space is shown to the validator as written (framework-seams.md, seam 3).
      const restored = Object.keys(query).filter((name) => typeof parsedQuery[name] === 'string' && parsedQuery[name] !== query[name]);
      if (restored.length > 0) {
        const value = { ...query, ...Object.fromEntries(restored.map((name) => [name, parsedQuery[name]])) };
        Object.defineProperty(req, 'query', { value, writable: true, configurable: true, enumerable: true });
      }
      next();
    };
    router[operation.method](
      expressPath(operation.path),
      guardFor(operation, document, guards),
      ...stage('before-validation'),
      // Only operations with a requestBody read one: a body sent to another is ignored, whatever its type.
      ...(operation.spec.requestBody ? [options.bodyParser] : []),
      parseQuery,
      ...(operation.method === 'get' ? [showHeadAsGet, ...options.validator, restoreHead] : options.validator),
      ...stage('after-validation'),
      adapt(operation.operationId, handlers[operation.operationId]),
    );
  }
  router.use(methodFallback(operations, options.notFoundMessage ?? 'No such route. See /docs for the API reference.'));
  return { router, operations: operations.map(({ operationId, method, path }) => ({ operationId, method, path })) };
}

/**
 * For requests no operation took: OPTIONS on a known path answers 204 with `Allow`; another
 * method on a known path is 405 with `Allow`; anything else is 404.
 */
function methodFallback(operations: MountedOperation[], notFoundMessage: string): RequestHandler {
  const byPath = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  for (const operation of operations) {
    const entry = byPath.get(operation.path) ?? {
      pattern: new RegExp(`^${operation.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}/?$`),
      methods: new Set<string>(),
    };
    entry.methods.add(operation.method.toUpperCase());
    if (operation.method === 'get') entry.methods.add('HEAD');
    entry.methods.add('OPTIONS');
    byPath.set(operation.path, entry);
  }
  const order = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
  return (req, res) => {
    const methods = new Set<string>();
    for (const entry of byPath.values()) if (entry.pattern.test(req.path)) for (const m of entry.methods) methods.add(m);
    if (methods.size === 0) throw new ApiError('not_found', notFoundMessage);
    const allow = order.filter((m) => methods.has(m)).join(', ');
    if (req.method === 'OPTIONS') {
      res.setHeader('Allow', allow);
      res.status(204).end();
      return;
    }
    throw new ApiError('method_not_allowed', `This route does not accept ${req.method}; it accepts ${allow}.`, { headers: { Allow: allow } });
  };
}
