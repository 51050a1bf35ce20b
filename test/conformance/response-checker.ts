import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Json } from './target';

/**
 * Checks a response against a served OpenAPI document with Ajv 2020 (independent of
 * express-openapi-validator, which the gateway itself uses): the status is documented for the
 * operation, the body matches the schema of its content type, every declared header is valid and
 * every required one present, every header outside plain HTTP is declared, and an error's
 * envelope `request_id` equals `X-Request-Id`. Requests outside the spec's operations must get the
 * documented 404 / 405 (with Allow) / OPTIONS 204 (with Allow) / HEAD-as-GET answers.
 */

/** Headers of HTTP itself or of every response (security-headers.ts), which no operation declares. */
export const PLAIN_HTTP_HEADERS = new Set([
  'content-type',
  'content-length',
  'date',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'x-content-type-options',
  'x-frame-options',
  'referrer-policy',
  'cache-control',
  'vary',
  'content-security-policy',
]);

export interface CheckedResponse {
  method: string;
  /** Path without the query. */
  path: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

interface Operation {
  responses: Record<string, Json>;
}

export class ResponseChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  private readonly templates: Array<{ template: string; pattern: RegExp }>;
  private readonly paths: Record<string, Record<string, Operation>>;

  constructor(
    private readonly name: string,
    private readonly document: Json,
  ) {
    addFormats(this.ajv);
    this.ajv.addSchema(document, name);
    this.paths = document.paths as Record<string, Record<string, Operation>>;
    this.templates = Object.keys(this.paths).map((template) => ({
      template,
      pattern: new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
    }));
  }

  private pointerTo(node: unknown, pointer: string): { value: Json; pointer: string } {
    let at = node as Json;
    let where = pointer;
    while (typeof at.$ref === 'string') {
      where = at.$ref.slice(1);
      at = this.at(where);
    }
    return { value: at, pointer: where };
  }

  private at(pointer: string): Json {
    return pointer
      .split('/')
      .slice(1)
      .reduce<unknown>((node, part) => (node as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document) as Json;
  }

  private schemaErrors(pointer: string, value: unknown): string | undefined {
    const validate = this.ajv.getSchema(`${this.name}#${pointer}`);
    if (!validate) return `no schema at ${pointer}`;
    return validate(value) ? undefined : this.ajv.errorsText(validate.errors);
  }

  templateOf(path: string): string | undefined {
    return this.templates.find((t) => t.pattern.test(path))?.template;
  }

  /** Problems found (empty when the response conforms). */
  check(res: CheckedResponse): string[] {
    const problems: string[] = [];
    const where = `${res.method} ${res.path} -> ${res.status}`;
    if (res.status >= 500) problems.push(`${where}: 5xx`);
    const template = this.templateOf(res.path);
    const method = res.method.toLowerCase();
    const item = template ? this.paths[template] : undefined;
    const operation = item?.[method === 'head' ? 'get' : method];
    const requestId = res.headers['x-request-id'];
    if (typeof requestId !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(requestId)) problems.push(`${where}: X-Request-Id missing or malformed`);

    if (!operation) {
      const methods = item ? Object.keys(item).filter((m) => m !== 'parameters') : [];
      const allowed = new Set(['X-Request-Id', 'Allow'].map((h) => h.toLowerCase()));
      for (const header of Object.keys(res.headers))
        if (!PLAIN_HTTP_HEADERS.has(header) && !allowed.has(header)) problems.push(`${where}: undeclared header ${header}`);
      if (method === 'options' && item) {
        if (res.status !== 204 || typeof res.headers.allow !== 'string') problems.push(`${where}: OPTIONS must be 204 with Allow`);
        return problems;
      }
      const expected = item && methods.length > 0 ? 405 : 404;
      if (res.status !== expected) problems.push(`${where}: expected ${expected} outside the spec's operations`);
      if (expected === 405 && typeof res.headers.allow !== 'string') problems.push(`${where}: 405 without Allow`);
      if (method !== 'head') this.checkEnvelope(where, res, problems, '/components/schemas/Error');
      return problems;
    }

    const escaped = template!.replace(/~/g, '~0').replace(/\//g, '~1');
    const base = `/paths/${escaped}/${method === 'head' ? 'get' : method}/responses`;
    const status = String(res.status) in operation.responses ? String(res.status) : 'default' in operation.responses ? 'default' : undefined;
    if (!status) {
      problems.push(`${where}: status not documented for ${method} ${template}`);
      return problems;
    }
    const response = this.pointerTo(operation.responses[status], `${base}/${status}`);
    const declared = (response.value.headers ?? {}) as Record<string, Json>;
    const declaredLower = new Map(Object.entries(declared).map(([name, header]) => [name.toLowerCase(), { name, header }]));
    for (const header of Object.keys(res.headers)) {
      if (PLAIN_HTTP_HEADERS.has(header)) continue;
      if (!declaredLower.has(header)) problems.push(`${where}: header ${header} is not declared on this response`);
    }
    for (const [lower, { name, header }] of declaredLower) {
      const resolved = this.pointerTo(header, `${response.pointer}/headers/${name}`);
      const value = res.headers[lower];
      if (value === undefined) {
        if (resolved.value.required === true) problems.push(`${where}: required header ${name} missing`);
        continue;
      }
      const schema = resolved.value.schema as Json | undefined;
      const typed = schema?.type === 'integer' && typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : value;
      const error = schema ? this.schemaErrors(`${resolved.pointer}/schema`, typed) : undefined;
      if (error) problems.push(`${where}: header ${name}=${String(value)}: ${error}`);
    }
    const content = response.value.content as Record<string, Json> | undefined;
    if (method === 'head') {
      if (res.text) problems.push(`${where}: HEAD with a body`);
      return problems;
    }
    if (!content) {
      if (res.text) problems.push(`${where}: a body where none is documented`);
      return problems;
    }
    const type = String(res.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim();
    if (!(type in content)) {
      problems.push(`${where}: content type "${type}" not documented`);
      return problems;
    }
    if (type === 'application/json') {
      const escapedType = type.replace(/\//g, '~1');
      this.checkEnvelope(where, res, problems, `${response.pointer}/content/${escapedType}/schema`);
    }
    return problems;
  }

  private checkEnvelope(where: string, res: CheckedResponse, problems: string[], schemaPointer: string): void {
    let body: unknown;
    try {
      body = JSON.parse(res.text);
    } catch {
      problems.push(`${where}: body is not JSON`);
      return;
    }
    const error = this.schemaErrors(schemaPointer, body);
    if (error) problems.push(`${where}: body: ${error}`);
    const envelope = (body as { error?: { request_id?: unknown } } | null)?.error;
    if (res.status >= 400 && envelope && envelope.request_id !== res.headers['x-request-id']) problems.push(`${where}: request_id differs from X-Request-Id`);
  }
}
