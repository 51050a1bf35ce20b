import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Response } from 'supertest';
import { loadOpenApiDocument, type OpenApiDocument } from '../../src/http/openapi-document';

/**
 * Validates any test response against the spec, including those that never reach
 * express-openapi-validator's response check (auth refusals, unknown routes). The
 * operation is found by method and path template; an undocumented status fails.
 */
export class SpecResponses {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  private readonly templates: Array<{ template: string; pattern: RegExp }>;

  constructor(
    private readonly name: 'gateway' | 'creative',
    private readonly document: OpenApiDocument = loadOpenApiDocument(name),
    private readonly basePath = '',
  ) {
    addFormats(this.ajv);
    this.ajv.addSchema(document as object, name);
    this.templates = Object.keys(document.paths).map((template) => ({
      template,
      pattern: new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  }

  private resolve(pointer: string): { pointer: string; value: Record<string, unknown> } {
    let value: unknown = this.document;
    for (const part of pointer.split('/').slice(1)) {
      value = (value as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    const ref = (value as { $ref?: string }).$ref;
    if (ref?.startsWith('#/')) return this.resolve(ref.slice(1));
    return { pointer, value: value as Record<string, unknown> };
  }

  private validate(schemaPointer: string, body: unknown): string | undefined {
    const validate = this.ajv.getSchema(`${this.name}#${schemaPointer}`);
    if (!validate) return `no schema at ${schemaPointer}`;
    return validate(body) ? undefined : this.ajv.errorsText(validate.errors);
  }

  /** Returns a description of what is wrong, or undefined when the response matches the spec. */
  check(method: string, url: string, res: Response): string | undefined {
    // Express (like the validator) matches with or without one trailing slash.
    const path = url
      .split('?')[0]!
      .slice(this.basePath.length)
      .replace(/(.)\/$/, '$1');
    const found = this.templates.find((t) => t.pattern.test(path));
    const isError = res.status >= 400;
    // HEAD is documented as its GET (same status and headers, no body).
    const head = method.toLowerCase() === 'head';
    const verb = head ? 'get' : method.toLowerCase();
    const operation = found && (this.document.paths[found.template] as Record<string, unknown>)[verb];
    if (!found || !operation) {
      // Outside the spec only the error envelope (404/405) is allowed.
      if (!isError) return `${method} ${path} answered ${res.status} but is not in the spec`;
      return this.validate('/components/schemas/Error', res.body);
    }
    const escaped = found.template.replace(/~/g, '~0').replace(/\//g, '~1');
    const responses = `/paths/${escaped}/${verb}/responses`;
    const documented = (operation as { responses: Record<string, unknown> }).responses;
    const status = String(res.status) in documented ? String(res.status) : 'default' in documented ? 'default' : undefined;
    if (!status) return `${method} ${found.template} answered ${res.status}, which the spec does not document`;
    const response = this.resolve(`${responses}/${status}`);
    const content = response.value.content as Record<string, unknown> | undefined;
    if (!content) return res.text ? `${method} ${found.template} ${res.status} should have no body` : undefined;
    const type = String(res.headers['content-type'] ?? '').split(';')[0]!;
    if (!(type in content)) return `${method} ${found.template} ${res.status} answered content type "${type}"`;
    if (type !== 'application/json' || head) return undefined;
    return this.validate(`${response.pointer}/content/application~1json/schema`, res.body);
  }
}
