import type { PromptRuleFields } from './prompt-rule-fields';
import { Field, TextArea } from './ui';

/**
 * A project's or a key's prompt rules (docs/guardrails.md) as four fields, in the form that saves
 * them; prompt-rule-fields.ts turns them into rules and back.
 */
export function PromptRulesEditor({
  fields,
  set,
  note,
}: {
  fields: PromptRuleFields;
  set: (field: keyof PromptRuleFields) => (value: string) => void;
  note?: string;
}) {
  return (
    <fieldset>
      <legend>Prompt rules</legend>
      {note && <p class="hint">{note}</p>}
      <div class="grid">
        <Field label="Maximum prompt length" type="number" min={1} value={fields.maxLength} onInput={set('maxLength')} hint="Characters; empty: no maximum" />
        <TextArea
          label="Blocked terms"
          value={fields.blockedTerms}
          onInput={set('blockedTerms')}
          hint="One a line; matched anywhere, ignoring case, width and accents"
        />
        <TextArea label="Blocked patterns" value={fields.blockedPatterns} onInput={set('blockedPatterns')} hint="Regular expressions, one a line" />
        <TextArea
          label="Allowed prompts (patterns)"
          value={fields.allowedPatterns}
          onInput={set('allowedPatterns')}
          hint="One a line; a prompt must match one whole; empty: any prompt"
        />
      </div>
    </fieldset>
  );
}
