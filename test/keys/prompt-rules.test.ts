import { type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * A key's prompt rules (issue #38 §2, src/guardrails/prompt-rules.ts): set and read through the admin
 * API, refused when a pattern could not be matched in linear time, and applied before anything is
 * reserved or sent: 400 prompt_blocked naming the rule, never the matched text (not in the answer,
 * not in the logs).
 */
describe('key prompt rules', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  const RULES = [
    { kind: 'max_length', max: 200 },
    { id: 'gr_no_brands', kind: 'blocked_term', term: 'AcmeCola' },
    { kind: 'blocked_pattern', pattern: '\\b(gore|nsfw)\\b' },
  ];

  it('are set on create, get ids, are read back, replaced and removed on update', async () => {
    const created = await t.api.admin('post', '/admin/keys', {
      name: 'rules',
      owner: 'rules@example.com',
      credits_quota: 10,
      quota_period_days: 30,
      prompt_rules: RULES,
    });
    expect(created.status).toBe(201);
    const rules = created.body.prompt_rules as Array<{ id: string; kind: string }>;
    expect(rules.map((r) => r.kind)).toEqual(['max_length', 'blocked_term', 'blocked_pattern']);
    expect(rules[1]!.id).toBe('gr_no_brands');
    for (const rule of rules) expect(rule.id).toMatch(/^gr_[A-Za-z0-9_]+$/);
    const read = await t.api.admin('get', `/admin/keys/${created.body.id}`);
    expect(read.body.prompt_rules).toEqual(rules);

    const replaced = await t.api.admin('patch', `/admin/keys/${created.body.id}`, { prompt_rules: [{ kind: 'allow_list', patterns: ['logo for \\w+'] }] });
    expect(replaced.status).toBe(200);
    expect(replaced.body.prompt_rules).toEqual([expect.objectContaining({ kind: 'allow_list', patterns: ['logo for \\w+'] })]);
    const removed = await t.api.admin('patch', `/admin/keys/${created.body.id}`, { prompt_rules: null });
    expect(removed.body.prompt_rules).toBeNull();
    // A key without rules says so.
    expect((await t.createKey()).record.prompt_rules).toBeNull();
  });

  it.each([
    ['a pattern that is not a regular expression', [{ kind: 'blocked_pattern', pattern: '(unclosed' }], 'prompt_rules[0].pattern'],
    ['a back-reference (no linear-time match)', [{ kind: 'blocked_pattern', pattern: '(a)\\1' }], 'prompt_rules[0].pattern'],
    [
      'two max_length rules',
      [
        { kind: 'max_length', max: 5 },
        { kind: 'max_length', max: 6 },
      ],
      'prompt_rules[1].kind',
    ],
    ['a field of another kind', [{ kind: 'blocked_term', term: 'x', max: 3 }], 'prompt_rules[0].max'],
  ])('refuses %s with 400 naming the field', async (_what, promptRules, param) => {
    const res = await t.api.admin('post', '/admin/keys', {
      name: 'bad',
      owner: 'bad@example.com',
      credits_quota: 10,
      quota_period_days: 30,
      prompt_rules: promptRules,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
  });

  it('a blocked prompt is refused with 400 prompt_blocked before anything is reserved: sync, async and the OpenAI path; the rule is named, the text is not', async () => {
    const { id, key } = await t.createKey({ prompt_rules: RULES, credits_quota: 100 });
    const headers = { Authorization: `Bearer ${key}` };
    const before = await t.api.creditsUsed(id);
    const logsBefore = t.logs.length;
    const refusals = [
      await t.api.send('post', '/images/generate', { body: { prompt: 'a can of acmecola on a beach', model: 'local-1' }, headers }),
      await t.api.send('post', '/images/generate', {
        body: { prompt: 'a can of ACMECOLA, later', model: 'local-1' },
        headers: { ...headers, Prefer: 'respond-async' },
      }),
      await t.api.send('post', '/v1/images/generations', { body: { prompt: 'so much gore here', model: 'local-1' }, headers }),
      await t.api.send('post', '/images/generate', { body: { prompt: 'x'.repeat(201), model: 'local-1' }, headers }),
    ];
    expect(refusals.map((r) => [r.status, r.body.error.code, r.body.error.param])).toEqual(Array(4).fill([400, 'prompt_blocked', 'prompt']));
    expect(refusals[0]!.body.error.message).toContain('gr_no_brands');
    for (const refusal of refusals) expect(refusal.body.error.message.toLowerCase()).not.toMatch(/acmecola|gore|xxxx/);
    expect(await t.api.creditsUsed(id)).toBe(before);
    expect(t.logs.slice(logsBefore).filter((line) => /acmecola|gore/i.test(line))).toEqual([]);
    // A prompt the rules allow generates as usual.
    const allowed = await t.api.send('post', '/images/generate', {
      body: { prompt: 'a can of soda on a beach', model: 'local-1', response_format: 'b64_json' },
      headers,
    });
    expect(allowed.status).toBe(200);
  });
});
