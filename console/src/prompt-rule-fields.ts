import type { components } from '../../generated/gateway';

// Prompt rules as the console's forms type them, and back, without the browser: test/unit/console-prompt-rule-fields.test.ts.

export type PromptRule = components['schemas']['PromptRule'];
export type PromptRules = components['schemas']['PromptRules'];

/** A rule set as four fields: a number (empty: no maximum) and three lists, one entry a line. */
export interface PromptRuleFields {
  maxLength: string;
  blockedTerms: string;
  blockedPatterns: string;
  allowedPatterns: string;
}

const linesOf = (list: readonly string[]) => list.join('\n');

/**
 * A textarea's entries: one a line, as typed (a term or pattern may begin or end with a space on
 * purpose); blank lines are left out.
 */
const entriesOf = (text: string) =>
  text
    .split('\n')
    .map((line) => line.replace(/\r$/, ''))
    .filter((line) => line.trim() !== '');

export function ruleFieldsOf(rules: PromptRules): PromptRuleFields {
  const all = rules ?? [];
  const maxLength = all.find((rule) => rule.kind === 'max_length')?.max;
  return {
    maxLength: maxLength === undefined ? '' : String(maxLength),
    blockedTerms: linesOf(all.flatMap((rule) => (rule.kind === 'blocked_term' && rule.term !== undefined ? [rule.term] : []))),
    blockedPatterns: linesOf(all.flatMap((rule) => (rule.kind === 'blocked_pattern' && rule.pattern !== undefined ? [rule.pattern] : []))),
    allowedPatterns: linesOf(all.find((rule) => rule.kind === 'allow_list')?.patterns ?? []),
  };
}

/**
 * The rule set the fields say, in the order length, terms, patterns, allow-list (the order the gateway
 * checks them in anyway). A rule that was there before keeps its id, so that saving does not rename
 * it in usage and logs: a term or a pattern is matched by its text (each earlier rule used once), the
 * maximum length and the allow-list by kind alone (a set has at most one of each). New rules go
 * without an id, for the gateway to give. No rules at all is null.
 */
export function rulesOf(fields: PromptRuleFields, previous: PromptRules): PromptRules {
  const unused = [...(previous ?? [])];
  const take = (matches: (rule: PromptRule) => boolean): { id?: string } => {
    const at = unused.findIndex(matches);
    if (at < 0) return {};
    const [rule] = unused.splice(at, 1);
    return rule?.id === undefined ? {} : { id: rule.id };
  };
  const rules: PromptRule[] = [];
  const maxLength = fields.maxLength.trim();
  if (maxLength !== '') rules.push({ ...take((rule) => rule.kind === 'max_length'), kind: 'max_length', max: Number(maxLength) });
  for (const term of entriesOf(fields.blockedTerms))
    rules.push({ ...take((rule) => rule.kind === 'blocked_term' && rule.term === term), kind: 'blocked_term', term });
  for (const pattern of entriesOf(fields.blockedPatterns))
    rules.push({ ...take((rule) => rule.kind === 'blocked_pattern' && rule.pattern === pattern), kind: 'blocked_pattern', pattern });
  const allowed = entriesOf(fields.allowedPatterns);
  if (allowed.length > 0) rules.push({ ...take((rule) => rule.kind === 'allow_list'), kind: 'allow_list', patterns: allowed });
  return rules.length > 0 ? rules : null;
}

/**
 * `{ prompt_rules }` for an update when the fields say something else than `previous` does, else
 * nothing: saving a form's other settings leaves the rules as stored. Both sides are compared as the
 * fields would give them, so that a set stored in another order (or `[]` for null) is no change.
 */
export function promptRulesChange(fields: PromptRuleFields, previous: PromptRules): { prompt_rules?: PromptRules } {
  const rules = rulesOf(fields, previous);
  return JSON.stringify(rules) === JSON.stringify(rulesOf(ruleFieldsOf(previous), previous)) ? {} : { prompt_rules: rules };
}
