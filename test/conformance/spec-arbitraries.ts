import fc from 'fast-check';

/**
 * fast-check arbitraries made from a served OpenAPI document's JSON Schemas: values that satisfy a
 * schema, and mutations that break it (types, bounds, formats, huge and odd strings, unicode,
 * missing and extra members). The fuzzer's requests come only from here and the document.
 */
export interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  minProperties?: number;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

export const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '💥'.repeat(200),
  'x'.repeat(5000),
  '../../etc/passwd',
  '%00',
  '%',
  '{"a":1}',
  'null',
  'Infinity',
  '0x10',
  '1e309',
  '9'.repeat(300),
  '-0',
  'a@b.com',
  'a:b/c',
  '\u202e\u200b\ufeff',
  'Ω≈ç√∫',
  '<script>alert(1)</script>',
  "'; DROP TABLE api_keys; --",
];

const oddString = fc.oneof(
  fc.constantFrom(...ODD_STRINGS),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
);

export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  oddString,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(2 ** 53 + 1),
  fc.constant(-1),
);

const DATE_TIMES = fc.oneof(
  fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.constantFrom('2030-06-30T23:59:60Z', '2030-01-01t00:00:00z', '2030-01-01T01:00:00.123456+01:00', '2029-12-31T19:00:00-05:00', '2030-02-28T00:00:00Z'),
);
const BAD_DATE_TIMES = fc.constantFrom(
  '2030-02-30T00:00:00Z',
  '2030-13-01T00:00:00Z',
  '2030-01-01',
  '2030-01-01T00:00:00',
  'yesterday',
  '2030-01-01T12:59:60Z',
  '1e10',
  '',
);

export class SpecArbitraries {
  constructor(private readonly document: Record<string, unknown>) {}

  resolve<T>(node: T | { $ref: string }): T {
    let value: unknown = node;
    while (value && typeof value === 'object' && typeof (value as { $ref?: unknown }).$ref === 'string') {
      value = (value as { $ref: string }).$ref
        .slice(2)
        .split('/')
        .reduce<unknown>((at, part) => (at as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
    }
    return value as T;
  }

  /** Values the schema accepts. */
  valid(input: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
    const schema = this.resolve(input);
    if (schema.enum) return fc.constantFrom(...schema.enum);
    const alternatives = schema.oneOf ?? schema.anyOf;
    if (alternatives) return fc.oneof(...alternatives.map((s) => this.valid(s, depth)));
    if (schema.allOf) {
      return fc.tuple(...schema.allOf.map((s) => this.valid(s, depth))).map((parts) => Object.assign({}, ...parts.filter((p) => p && typeof p === 'object')));
    }
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    switch (type) {
      case 'null':
        return fc.constant(null);
      case 'boolean':
        return fc.boolean();
      case 'integer':
        return fc.integer({ min: schema.minimum ?? -1_000_000, max: Math.min(schema.maximum ?? 1_000_000, Number.MAX_SAFE_INTEGER) });
      case 'number':
        return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true });
      case 'string': {
        if (schema.format === 'date-time') return DATE_TIMES;
        const minLength = schema.minLength ?? 0;
        const maxLength = Math.min(schema.maxLength ?? 60, 60);
        if (schema.pattern) {
          return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length >= minLength && s.length <= (schema.maxLength ?? Infinity));
        }
        return fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789 -_.@é世'), minLength, maxLength: Math.max(minLength, maxLength) });
      }
      case 'array': {
        const items = this.valid(schema.items ?? {}, depth + 1);
        const constraints = { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 3, 3) };
        return schema.uniqueItems ? fc.uniqueArray(items, { ...constraints, selector: (v) => JSON.stringify(v) }) : fc.array(items, constraints);
      }
      case 'object':
      case undefined: {
        if (depth > 4 || !schema.properties) return fc.constant({});
        const properties = Object.fromEntries(Object.entries(schema.properties).map(([name, s]) => [name, this.valid(s, depth + 1)]));
        return fc.record(properties, { requiredKeys: schema.required ?? [] }).filter((o) => Object.keys(o).length >= (schema.minProperties ?? 0));
      }
      default:
        return anyJson;
    }
  }

  /** Values that break the schema in one way (usually), or odd values of the right type. */
  invalid(input: JsonSchema): fc.Arbitrary<unknown> {
    const schema = this.resolve(input);
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    const breaks: Array<fc.Arbitrary<unknown>> = [anyJson];
    if (type === 'string') {
      breaks.push(oddString, fc.integer(), fc.constant(null));
      if (schema.maxLength !== undefined) breaks.push(fc.constant('y'.repeat(schema.maxLength + 1)));
      if (schema.format === 'date-time') breaks.push(BAD_DATE_TIMES);
    }
    if (type === 'integer' || type === 'number') {
      breaks.push(fc.double(), fc.constantFrom('1', '0x10', 'Infinity', true, 1.5, -0, 1e300));
      if (schema.maximum !== undefined) breaks.push(fc.constant(schema.maximum + 1));
      if (schema.minimum !== undefined) breaks.push(fc.constant(schema.minimum - 1));
    }
    if (type === 'array') breaks.push(fc.constant([]), fc.array(anyJson, { maxLength: 5 }), fc.constant('local'));
    return fc.oneof(...breaks);
  }

  /** An object schema's valid value with one member replaced by an invalid one, removed, or one added. */
  mutatedObject(input: JsonSchema, base?: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
    const schema = this.resolve(input);
    const names = Object.keys(schema.properties ?? {});
    const start = base ?? this.valid(schema);
    if (names.length === 0) return fc.oneof(start, anyJson);
    return fc.tuple(start, fc.constantFrom(...names, 'extra_member', '__proto__', 'constructor'), fc.nat(3)).chain(([value, name, how]) => {
      const object = value && typeof value === 'object' && !Array.isArray(value) ? { ...(value as Record<string, unknown>) } : {};
      const propertySchema = schema.properties?.[name];
      if (how === 0 || !propertySchema) {
        delete object[name];
        return propertySchema ? fc.constant(object) : anyJson.map((extra) => JSON.parse(JSON.stringify({ ...object, [name]: extra })) as unknown);
      }
      return this.invalid(propertySchema).map((bad) => ({ ...object, [name]: bad }));
    });
  }
}
