import fc from 'fast-check';
import { closeClient, exchange } from './http-client';
import { multipartRequests } from './multipart-arbitraries';
import { ResponseChecker } from './response-checker';
import { type JsonSchema, ODD_STRINGS, SpecArbitraries } from './spec-arbitraries';
import { type ConformanceTarget, conformanceTarget } from './target';

/**
 * The schema-driven fuzzer: requests are generated from the served documents (every operation,
 * valid and mutated parameters and bodies, odd content types, methods, credentials) and every
 * response is checked by ResponseChecker (Ajv 2020 against the served document). CI runs
 * FUZZ_RUNS (default 3,200) requests with a fixed seed; docs/maintainers/conformance.md shows a larger run.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 3200);
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: JsonSchema;
}
interface OperationSpec {
  operationId: string;
  parameters?: Parameter[];
  security?: Array<Record<string, string[]>>;
  requestBody?: { content: Record<string, { schema: JsonSchema; examples?: Record<string, { value: unknown }> }> };
  'x-idempotent'?: boolean;
}
interface FuzzRequest {
  api: 'gateway' | 'creative';
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

describe('conformance: schema-driven fuzzer against a gateway process', () => {
  let target: ConformanceTarget;
  const known = { keyId: '', generationId: '', clientKey: '' };
  beforeAll(async () => {
    target = await conformanceTarget();
    const created = await exchange(target.gatewayUrl, {
      method: 'POST',
      path: '/admin/keys',
      headers: { Authorization: `Bearer ${target.adminSecret}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        name: 'fuzz',
        owner: 'fuzz@example.com',
        credits_quota: 1_000_000_000,
        quota_period_days: 30,
        rate_limit_rpm: 100_000,
        allowed_providers: ['local', 'jimeng'],
      }),
    });
    known.clientKey = (JSON.parse(created.text) as { key: string }).key;
    // Path ids name another key, so a generated rotate or disable never takes the fuzzer's own key away.
    const victim = await exchange(target.gatewayUrl, {
      method: 'POST',
      path: '/admin/keys',
      headers: { Authorization: `Bearer ${target.adminSecret}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'fuzz victim', owner: 'fuzz@example.com', credits_quota: 10, quota_period_days: 30, allowed_providers: ['local'] }),
    });
    known.keyId = (JSON.parse(victim.text) as { id: string }).id;
    const generation = await exchange(target.internalUrl, {
      method: 'POST',
      path: '/api/v1/creative/images/generations',
      headers: { ...target.serviceToken, 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'fuzz seed', model: 'local-1', size: '32x32' }),
    });
    known.generationId = (JSON.parse(generation.text) as { id: string }).id;
  }, 60_000);
  afterAll(async () => {
    closeClient();
    await target?.close();
  });

  function requestsFor(api: 'gateway' | 'creative'): fc.Arbitrary<FuzzRequest> {
    const document = target.documents[api];
    const arbitraries = new SpecArbitraries(document);
    const credentials = (operation: OperationSpec): fc.Arbitrary<Record<string, string>> => {
      const schemes = Object.keys((operation.security ?? (document.security as OperationSpec['security']) ?? [])[0] ?? {});
      const good = schemes.includes('ApiKey')
        ? { Authorization: `Bearer ${known.clientKey}` }
        : schemes.includes('AdminSecret')
          ? { Authorization: `Bearer ${target.adminSecret}` }
          : schemes.includes('ServiceTokenId')
            ? target.serviceToken
            : {};
      const wrong = fc.oneof(
        fc.constant({}),
        fc.constant({ Authorization: `Bearer ${target.adminSecret}` }),
        fc.constant({ Authorization: `Bearer ${known.clientKey.slice(0, -1)}x` }),
        fc.constant({ 'CF-Access-Client-Id': target.serviceToken['CF-Access-Client-Id'] ?? '', 'CF-Access-Client-Secret': 'wrong-secret-0123456789' }),
        fc.string({ unit: fc.constantFrom(...'abcXYZ019_-. '), maxLength: 60 }).map((s) => ({ Authorization: s })),
      );
      return fc.oneof({ weight: 8, arbitrary: fc.constant(good) }, { weight: 1, arbitrary: wrong });
    };
    const queryValue = (parameter: Parameter): fc.Arbitrary<string | undefined> => {
      const schema = parameter.schema ?? {};
      const valid = arbitraries.valid(schema).map((v) => String(v));
      const invalid = fc.oneof(
        arbitraries.invalid(schema).map((v) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))),
        fc.constantFrom(...ODD_STRINGS),
      );
      const extra = parameter.name === 'cursor' ? [fc.constantFrom('abc', 'a'.repeat(200))] : [];
      return fc
        .option(fc.oneof({ weight: 3, arbitrary: valid }, { weight: 2, arbitrary: invalid }, ...extra.map((arbitrary) => ({ weight: 1, arbitrary }))), {
          freq: 2,
        })
        .map((v) => v ?? undefined);
    };
    const pathValue = (parameter: Parameter): fc.Arbitrary<string> => {
      const real = parameter.name === 'id' ? [known.keyId, known.generationId] : [];
      return fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...real, 'key_doesnotexist', 'gen_doesnotexist') },
        { weight: 2, arbitrary: arbitraries.valid(parameter.schema ?? {}).map(String) },
        { weight: 1, arbitrary: fc.constantFrom(...ODD_STRINGS).filter((s) => s !== '') },
      );
    };
    // Percent-encoded UTF-8 (lone surrogates included), or with `@`, `:` and `/` left as they are.
    const percentEncode = (value: string, keep: RegExp) =>
      [...Buffer.from(value, 'utf8')]
        .map((byte) => (keep.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`))
        .join('');
    const encode = (value: string) => fc.constantFrom(/[A-Za-z0-9._~-]/, /[A-Za-z0-9._~@:/-]/).map((keep) => percentEncode(value, keep));

    const perOperation: Array<fc.Arbitrary<FuzzRequest>> = [];
    for (const [template, item] of Object.entries(document.paths as Record<string, Record<string, unknown>>)) {
      const shared = ((item.parameters as Parameter[] | undefined) ?? []).map((p) => arbitraries.resolve(p));
      for (const method of METHODS) {
        const operation = item[method] as OperationSpec | undefined;
        if (!operation) continue;
        const parameters = [...shared, ...(operation.parameters ?? []).map((p) => arbitraries.resolve(p))];
        const pathParams = parameters.filter((p) => p.in === 'path');
        const queryParams = parameters.filter((p) => p.in === 'query');
        const path = fc
          .tuple(...pathParams.map((p) => pathValue(p).chain(encode)))
          .map((values) => pathParams.reduce((at, p, i) => at.replace(`{${p.name}}`, values[i]!), template));
        const query = fc
          .tuple(
            fc.tuple(...queryParams.map((p) => queryValue(p).chain((v) => (v === undefined ? fc.constant(undefined) : encode(v))))),
            fc.option(fc.constantFrom('unknown=1', 'limit=1&limit=2', 'x%00=1', '=')),
          )
          .map(([values, extra]) => {
            const pairs = queryParams.flatMap((p, i) => (values[i] === undefined ? [] : [`${p.name}=${values[i]}`]));
            if (extra) pairs.push(extra);
            return pairs.length > 0 ? `?${pairs.join('&')}` : '';
          });
        const json = operation.requestBody?.content['application/json'];
        const body: fc.Arbitrary<string | undefined> = json
          ? fc.oneof(
              {
                weight: 3,
                arbitrary: arbitraries
                  .mutatedObject(json.schema, fc.constantFrom(...Object.values(json.examples ?? {}).map((e) => e.value), {}))
                  .map((v) => JSON.stringify(v)),
              },
              { weight: 2, arbitrary: fc.constantFrom(...Object.values(json.examples ?? {}).map((e) => JSON.stringify(e.value))) },
              { weight: 2, arbitrary: arbitraries.valid(json.schema).map((v) => JSON.stringify(v)) },
              {
                weight: 1,
                arbitrary: fc.oneof(
                  fc.string({ maxLength: 200 }),
                  fc.constantFrom('', '{', '[]', 'null', '{"a":', `${'['.repeat(100)}${']'.repeat(100)}`, '\u0000'),
                ),
              },
            )
          : fc.option(fc.constantFrom('{}', 'x'), { freq: 6 }).map((v) => v ?? undefined);
        const contentType = fc.oneof(
          { weight: 8, arbitrary: fc.constant('application/json') },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              'text/plain',
              'application/x-www-form-urlencoded',
              'application/json; charset=latin1',
              'multipart/form-data; boundary=x',
              'application/merge-patch+json',
              '',
            ),
          },
        );
        // Operations that take multipart bodies (OpenAI edits) get them, with their boundary, most of the time.
        const form = operation.requestBody?.content['multipart/form-data'] ? multipartRequests() : undefined;
        const requestMethod = fc.oneof(
          { weight: 12, arbitrary: fc.constant(method.toUpperCase()) },
          { weight: 1, arbitrary: fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'PUT', 'PATCH', 'DELETE', 'POST') },
        );
        const extraHeaders = fc.record(
          {
            'Idempotency-Key': operation['x-idempotent'] ? fc.oneof(fc.constantFrom('fuzz-1', 'fuzz-2'), fc.uuid()) : fc.constant('ignored'),
            'X-Request-Id': fc.oneof(fc.constantFrom('trace-1', 'a b', 'x'.repeat(200)), fc.string({ unit: fc.constantFrom(...'ab:._-/%'), maxLength: 10 })),
          },
          { requiredKeys: [] },
        );
        const payload: fc.Arbitrary<{ body: string | Buffer | undefined; type: string }> = form
          ? fc.oneof(
              { weight: 4, arbitrary: form.map(({ body, contentType }) => ({ body, type: contentType })) },
              { weight: 1, arbitrary: fc.tuple(body, contentType).map(([b, type]) => ({ body: b, type })) },
            )
          : fc.tuple(body, contentType).map(([b, type]) => ({ body: b, type }));
        perOperation.push(
          fc.tuple(requestMethod, path, query, payload, credentials(operation), extraHeaders).map(([m, p, q, { body: b, type }, auth, extra]) => {
            const headers: Record<string, string> = { ...auth, ...extra };
            if (b !== undefined && m !== 'GET' && m !== 'HEAD' && type) headers['Content-Type'] = type;
            return { api, method: m, path: `${p}${q}`, headers, body: m === 'GET' || m === 'HEAD' ? undefined : b };
          }),
        );
      }
    }
    return fc.oneof(...perOperation);
  }

  it(`sends ${RUNS} generated requests: 0 × 5xx, every status documented, bodies and headers valid`, async () => {
    const checkers = {
      gateway: new ResponseChecker('gateway', target.documents.gateway),
      creative: new ResponseChecker('creative', target.documents.creative),
    };
    const urls = { gateway: target.gatewayUrl, creative: target.internalUrl };
    const statuses = new Map<string, number>();
    const problems: string[] = [];
    let sent = 0;
    const requests = fc.oneof({ weight: 2, arbitrary: requestsFor('gateway') }, { weight: 1, arbitrary: requestsFor('creative') });
    await fc.assert(
      fc.asyncProperty(requests, async (req) => {
        const res = await exchange(urls[req.api], req);
        sent += 1;
        const key = `${req.api} ${res.status}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        const found = checkers[req.api].check(res);
        const shown = Buffer.isBuffer(req.body) ? { ...req, body: `${req.body.length} bytes: ${req.body.toString('latin1').slice(0, 300)}` } : req;
        if (found.length > 0)
          problems.push(...found.map((p) => `${p}\n    request: ${JSON.stringify(shown).slice(0, 400)}\n    response: ${res.text.slice(0, 300)}`));
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    console.log(`fuzzer: ${sent} requests (seed ${SEED}), statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}, problems ${problems.length}`);
    expect(problems.slice(0, 20)).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(RUNS);
  }, 600_000);
});
