import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { FORMATS } from '../../src/providers/formats';

interface TransportSchema {
  properties: { transport: { enum: string[] } };
}

/** The spec's transport enums name exactly the registry's wire formats (src/providers/formats.ts). */
describe('the provider registry and the spec', () => {
  const schemas = (loadOpenApiDocument('gateway') as unknown as { components: { schemas: Record<string, TransportSchema> } }).components.schemas;
  const sorted = (values: readonly string[]) => [...values].sort();

  it('a Channel\'s transport is one of the registry\'s formats, and every format is one', () => {
    expect(sorted(schemas.Channel!.properties.transport.enum)).toEqual(sorted(FORMATS.map((descriptor) => descriptor.format)));
  });

  it('a channel can be created over exactly the formats that have credentials (not the built-in local renderer)', () => {
    const withAccounts = FORMATS.filter((descriptor) => descriptor.credentials !== undefined).map((descriptor) => descriptor.format);
    expect(sorted(schemas.CreateChannelRequest!.properties.transport.enum)).toEqual(sorted(withAccounts));
  });
});
