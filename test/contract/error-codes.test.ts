import { ERROR_CODES } from '../../src/errors/error-codes';
import { loadOpenApiDocument } from '../../src/http/openapi-document';

type Json = Record<string, unknown>;
type Spec = Json & { paths: Record<string, Json>; components: { schemas: Json; responses: Json } };
const specs = [loadOpenApiDocument('gateway'), loadOpenApiDocument('creative')] as unknown as Spec[];
// Both specs take ErrorCode from openapi/shared.yaml.
const errorCodeSchema = specs[0]!.components.schemas.ErrorCode as { enum: string[]; 'x-http-status': Record<string, number> };

function resolve(spec: Spec, node: unknown): Json {
  const ref = (node as { $ref?: string }).$ref;
  if (!ref) return node as Json;
  return resolve(
    spec,
    ref
      .split('/')
      .slice(1)
      .reduce<unknown>((at, part) => (at as Json)[part], spec),
  );
}

/** Every (status, code) pair shown as an example on some operation's error response, in either spec. */
function documentedPairs(): Set<string> {
  const pairs = new Set<string>();
  for (const spec of specs)
    for (const item of Object.values(spec.paths)) {
      for (const operation of Object.values(item as Json)) {
        const responses = (operation as { responses?: Json }).responses ?? {};
        for (const [status, response] of Object.entries(responses)) {
          const examples = (resolve(spec, response).content as Json | undefined)?.['application/json'] as { examples?: Json } | undefined;
          for (const example of Object.values(examples?.examples ?? {})) {
            const code = (example as { value?: { error?: { code?: string } } }).value?.error?.code;
            if (code) pairs.add(`${status} ${code}`);
          }
        }
      }
    }
  return pairs;
}

describe('error codes: code and spec agree', () => {
  it('the spec enum lists exactly the codes the code can return', () => {
    expect([...errorCodeSchema.enum].sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });

  it('each code has the same HTTP status in the spec as in the code', () => {
    for (const [code, { status }] of Object.entries(ERROR_CODES)) {
      expect([code, errorCodeSchema['x-http-status'][code]]).toEqual([code, status]);
    }
  });

  it('each operation-level code is documented as an example under its status', () => {
    const pairs = documentedPairs();
    // not_found / method_not_allowed answer paths and methods outside the spec, so no operation shows them.
    const routing = new Set(['not_found', 'method_not_allowed']);
    const missing = Object.entries(ERROR_CODES)
      .filter(([code]) => !routing.has(code))
      .filter(([code, { status }]) => !pairs.has(`${status} ${code}`))
      .map(([code, { status }]) => `${status} ${code}`);
    expect(missing).toEqual([]);
  });

  it('every example code sits under the status the code maps to', () => {
    for (const pair of documentedPairs()) {
      const [status, code] = pair.split(' ') as [string, keyof typeof ERROR_CODES];
      expect([code, Number(status)]).toEqual([code, ERROR_CODES[code].status]);
    }
  });
});
