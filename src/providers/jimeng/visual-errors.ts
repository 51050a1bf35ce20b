import type { ErrorRule } from '../error-table';

/**
 * The visual API's codes ("即梦4.0" doc, 错误码 table, volcengine.com/docs/85621/1817045) and its
 * API gateway's (`ResponseMetadata.Error.Code`, volcengine.com/docs/6444/69728). 50511 (and 50519,
 * found in use but in no public table) is output moderation documented as retryable: a new task
 * is submitted (visual-transport.ts). Gateway refusals no row covers are safe elsewhere (the visual
 * service never saw the call); other codes may come after acceptance.
 */
export const VISUAL_ERRORS: readonly ErrorRule[] = [
  { codes: ['50411', '50412', '50413'], kind: 'content' },
  { codes: ['50511', '50519', '50512'], kind: 'output' },
  { codes: ['50429', '50430'], kind: 'busy' },
  { codes: ['50500', '50501'], kind: 'refused' },
  {
    codes: ['SignatureDoesNotMatch', 'InvalidAccessKey', 'InvalidCredential', 'AccessDenied', 'AccountOverdue', 'AccountDisable', 'MissingAuthenticationToken'],
    kind: 'account',
  },
];
