import { OpenAPISchemaValidator } from 'express-openapi-validator/dist/framework/openapi.schema.validator';
import { loadOpenApiDocument } from '../../src/http/openapi-document';

type ValidatedDocument = Parameters<OpenAPISchemaValidator['validate']>[0];

/**
 * The bundled documents the gateway serves and validates with are valid OpenAPI, checked by the
 * validator library's own schema check (which the gateway turns off at start: the files ship with the build).
 */
describe('the bundled OpenAPI documents', () => {
  it.each(['gateway', 'creative'] as const)('%s is valid OpenAPI 3.1 for express-openapi-validator', (name) => {
    const document = loadOpenApiDocument(name);
    const validator = new OpenAPISchemaValidator({ version: String(document.openapi), validateApiSpec: true });
    expect(validator.validate(document as unknown as ValidatedDocument).errors).toEqual([]);
  });

  it('a broken document is refused (the check can fail)', () => {
    const document = loadOpenApiDocument('creative');
    const validator = new OpenAPISchemaValidator({ version: String(document.openapi), validateApiSpec: true });
    const broken = { ...document, paths: { '/x': { get: { responses: { '200': { description: 7 } } } } } };
    expect(validator.validate(broken as unknown as ValidatedDocument).errors?.length).toBeGreaterThan(0);
  });
});
