import type { OpenApiDocument } from '../../src/http/openapi-document';
import { operationsOf } from '../../src/http/spec-router';

/**
 * What the integration tier must send each operation of the specs (docs/maintainers/test-tiers.md, "Operation coverage"):
 * one request answered with a documented 2xx, one answered with each documented 4xx/5xx, and, when
 * the operation has security, one refused 401. Pure: the documents, the records the test gateways
 * wrote (operation-recorder.ts) and the exceptions file in, the gaps out.
 */

export type ApiName = 'gateway' | 'creative';

/** One response a test gateway gave: which operation answered, with which status. */
export interface OperationRecord {
  api: ApiName;
  operationId: string;
  status: number;
}

export interface DocumentedError {
  status: number;
  /** The name of the `components/responses` entry it refers to, when it is one. */
  component?: string;
}

export interface DocumentedOperation {
  api: ApiName;
  operationId: string;
  secured: boolean;
  successes: number[];
  errors: DocumentedError[];
}

/**
 * The allow-list (test/contract/operation-coverage-exceptions.json), each entry with its reason.
 * `sharedResponses`: response components one shared layer produces alike for every operation that
 * documents them; each must be answered by some operation, not by each. `operations`: single
 * requirements left untested, keyed `api operationId status` (or `... success`, `... auth`).
 */
export interface CoverageExceptions {
  sharedResponses: Record<string, string>;
  operations: Record<string, string>;
}

export type Requirement = number | 'success' | 'auth';

export interface OperationGap {
  api: ApiName;
  operationId: string;
  missing: Requirement[];
}

export interface CoverageReport {
  gaps: OperationGap[];
  /** Exception entries that excused a requirement no test met. */
  excused: string[];
  /** Shared response components no operation answered. */
  sharedUnanswered: string[];
  /** Exception entries that name no requirement still missing: stale, to be removed. */
  staleExceptions: string[];
}

export function documentedOperations(api: ApiName, document: OpenApiDocument): DocumentedOperation[] {
  const defaultSecurity = (document.security as unknown[] | undefined) ?? [];
  return operationsOf(document).map(({ operationId, spec }) => {
    const { responses, security } = spec as unknown as { responses: Record<string, { $ref?: string }>; security?: unknown[] };
    const statuses = Object.entries(responses)
      .filter(([status]) => /^[1-5][0-9][0-9]$/.test(status))
      .map(([status, response]) => ({ status: Number(status), component: response.$ref?.split('/').pop() }));
    return {
      api,
      operationId,
      secured: (security ?? defaultSecurity).length > 0,
      successes: statuses.filter((r) => r.status >= 200 && r.status < 300).map((r) => r.status),
      errors: statuses.filter((r) => r.status >= 400).map((r) => (r.component ? r : { status: r.status })),
    };
  });
}

export const exceptionKey = (api: ApiName, operationId: string, requirement: Requirement): string => `${api} ${operationId} ${requirement}`;

export function coverageReport(operations: DocumentedOperation[], records: OperationRecord[], exceptions: CoverageExceptions): CoverageReport {
  const answered = new Map<string, Set<number>>();
  for (const record of records) {
    const key = `${record.api} ${record.operationId}`;
    answered.set(key, (answered.get(key) ?? new Set()).add(record.status));
  }
  const shared = (error: DocumentedError) => error.component !== undefined && error.component in exceptions.sharedResponses;
  const excused = new Set<string>();
  const gaps: OperationGap[] = [];
  const sharedAnswered = new Set<string>();
  for (const operation of operations) {
    const statuses = answered.get(`${operation.api} ${operation.operationId}`) ?? new Set<number>();
    const required: Requirement[] = [];
    if (!operation.successes.some((status) => statuses.has(status))) required.push('success');
    for (const error of operation.errors) {
      // A secured operation's 401 is its auth requirement, below.
      if (operation.secured && error.status === 401) continue;
      if (shared(error)) {
        if (statuses.has(error.status)) sharedAnswered.add(error.component!);
      } else if (!statuses.has(error.status)) required.push(error.status);
    }
    // The auth test: credentials missing or wrong are refused 401 (which every secured operation documents).
    if (operation.secured && !statuses.has(401)) required.push('auth');
    const missing = required.filter((requirement) => {
      const key = exceptionKey(operation.api, operation.operationId, requirement);
      if (!(key in exceptions.operations)) return true;
      excused.add(key);
      return false;
    });
    if (missing.length > 0) gaps.push({ api: operation.api, operationId: operation.operationId, missing });
  }
  const documentedShared = new Set(operations.flatMap((o) => o.errors.filter(shared).map((e) => e.component!)));
  return {
    gaps,
    excused: [...excused],
    sharedUnanswered: [...documentedShared].filter((name) => !sharedAnswered.has(name)),
    staleExceptions: [
      ...Object.keys(exceptions.operations).filter((key) => !excused.has(key)),
      ...Object.keys(exceptions.sharedResponses).filter((name) => !documentedShared.has(name)),
    ],
  };
}
