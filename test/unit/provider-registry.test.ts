import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { callsOfEntry, FORMATS } from '../../src/providers/formats';

interface TransportSchema {
  properties: { transport: { enum: string[] } };
}

/** The spec's transport enums name exactly the registry's wire formats (src/providers/formats.ts). */
describe('the provider registry and the spec', () => {
  const schemas = (loadOpenApiDocument('gateway') as unknown as { components: { schemas: Record<string, TransportSchema> } }).components.schemas;
  const sorted = (values: readonly string[]) => [...values].sort();

  it("a Channel's transport is one of the registry's formats, and every format is one", () => {
    expect(sorted(schemas.Channel!.properties.transport.enum)).toEqual(sorted(FORMATS.map((descriptor) => descriptor.format)));
  });

  it('a channel can be created over exactly the formats that have credentials (not the built-in local renderer)', () => {
    const withAccounts = FORMATS.filter((descriptor) => descriptor.credentials !== undefined).map((descriptor) => descriptor.format);
    expect(sorted(schemas.CreateChannelRequest!.properties.transport.enum)).toEqual(sorted(withAccounts));
  });
});

describe('calls per request (formats.ts callsOfEntry: the one rule the failover, the task journal and the charges share)', () => {
  it("one per image, one for n, and one for n up to a model's images per call", () => {
    expect(callsOfEntry({ provider: 'jimeng', transport: 'ark', upstream_model: 'doubao-seedream-4-5-251128' }, 3)).toBe(3);
    expect(callsOfEntry({ provider: 'fal', upstream_model: 'fal-ai/flux/dev' }, 3)).toBe(1);
    expect(callsOfEntry({ provider: 'openai', upstream_model: 'gpt-image-1' }, 10)).toBe(1);
    expect(callsOfEntry({ provider: 'openai', upstream_model: 'gpt-image-1' }, 12)).toBe(2);
    expect(callsOfEntry({ provider: 'openai', upstream_model: 'dall-e-3' }, 3)).toBe(3);
  });
});
