import { type PromptRules, promptRulesChange, ruleFieldsOf, rulesOf } from '../../console/src/prompt-rule-fields';

const stored: PromptRules = [
  { id: 'gr_length', kind: 'max_length', max: 200 },
  { id: 'gr_logo', kind: 'blocked_term', term: 'logo' },
  { id: 'gr_brand', kind: 'blocked_term', term: 'brand' },
  { id: 'gr_gore', kind: 'blocked_pattern', pattern: '\\bgore\\b' },
  { id: 'gr_allowed', kind: 'allow_list', patterns: ['product shot of .+', 'logo for \\w+'] },
];

describe('the console prompt rules editor: rules as fields and back', () => {
  it('shows a set as a number and three lists, one entry a line; no rules as empty fields', () => {
    expect(ruleFieldsOf(stored)).toEqual({
      maxLength: '200',
      blockedTerms: 'logo\nbrand',
      blockedPatterns: '\\bgore\\b',
      allowedPatterns: 'product shot of .+\nlogo for \\w+',
    });
    expect(ruleFieldsOf(null)).toEqual({ maxLength: '', blockedTerms: '', blockedPatterns: '', allowedPatterns: '' });
  });

  it('gives back the same rules, ids and all, from unchanged fields', () => {
    expect(rulesOf(ruleFieldsOf(stored), stored)).toEqual(stored);
    expect(promptRulesChange(ruleFieldsOf(stored), stored)).toEqual({});
  });

  it('keeps the id of every rule still there, matching terms and patterns by text and the length and allow-list by kind; new rules get none', () => {
    const fields = {
      maxLength: '300',
      blockedTerms: 'brand\nwatermark\n\n',
      blockedPatterns: '\\bgore\\b\r\n(a)\\1',
      allowedPatterns: 'logo for \\w+',
    };
    expect(rulesOf(fields, stored)).toEqual([
      { id: 'gr_length', kind: 'max_length', max: 300 },
      { id: 'gr_brand', kind: 'blocked_term', term: 'brand' },
      { kind: 'blocked_term', term: 'watermark' },
      { id: 'gr_gore', kind: 'blocked_pattern', pattern: '\\bgore\\b' },
      { kind: 'blocked_pattern', pattern: '(a)\\1' },
      { id: 'gr_allowed', kind: 'allow_list', patterns: ['logo for \\w+'] },
    ]);
  });

  it('uses an earlier rule once: a term typed twice is a second, new rule', () => {
    expect(rulesOf({ maxLength: '', blockedTerms: 'logo\nlogo', blockedPatterns: '', allowedPatterns: '' }, stored)).toEqual([
      { id: 'gr_logo', kind: 'blocked_term', term: 'logo' },
      { kind: 'blocked_term', term: 'logo' },
    ]);
  });

  it('keeps a term as typed (a space at its start is part of it)', () => {
    expect(rulesOf({ maxLength: '', blockedTerms: ' ass', blockedPatterns: '', allowedPatterns: '' }, null)).toEqual([{ kind: 'blocked_term', term: ' ass' }]);
  });

  it('says null for all fields empty, and sends that only when there were rules', () => {
    const empty = { maxLength: ' ', blockedTerms: '\n', blockedPatterns: '', allowedPatterns: '' };
    expect(rulesOf(empty, stored)).toBeNull();
    expect(promptRulesChange(empty, stored)).toEqual({ prompt_rules: null });
    expect(promptRulesChange(empty, null)).toEqual({});
    expect(promptRulesChange(empty, [])).toEqual({});
  });

  it('sends a set stored in another order as no change, and any edit as the whole set', () => {
    const reordered = [...(stored ?? [])].reverse();
    expect(promptRulesChange(ruleFieldsOf(reordered), reordered)).toEqual({});
    const edited = { ...ruleFieldsOf(stored), blockedTerms: 'logo\nbranding' };
    expect(promptRulesChange(edited, stored).prompt_rules).toEqual([
      { id: 'gr_length', kind: 'max_length', max: 200 },
      { id: 'gr_logo', kind: 'blocked_term', term: 'logo' },
      { kind: 'blocked_term', term: 'branding' },
      { id: 'gr_gore', kind: 'blocked_pattern', pattern: '\\bgore\\b' },
      { id: 'gr_allowed', kind: 'allow_list', patterns: ['product shot of .+', 'logo for \\w+'] },
    ]);
  });
});
