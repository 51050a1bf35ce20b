import fs from 'node:fs';
import path from 'node:path';

/** Where this run's reporter (test/helpers/skip-summary-reporter.js) collects the reasons; unset outside jest's main run. */
const DIRECTORY_VARIABLE = 'CGW_SKIP_REASONS_DIR';

/**
 * Records why the tests of the calling file are skipped, for the summary printed at the end of the
 * run (`npm test` says what it skipped and why). Call it where the file decides to skip.
 */
export function recordSkipReason(reason: string): void {
  const directory = process.env[DIRECTORY_VARIABLE];
  const file = expect.getState().testPath;
  if (!directory || !file) return;
  fs.appendFileSync(path.join(directory, `${process.pid}.jsonl`), `${JSON.stringify({ file, reason })}\n`);
}

/** `describe.skip`, with the reason recorded for the summary. */
export function describeSkippedBecause(reason: string): jest.Describe {
  recordSkipReason(reason);
  return describe.skip;
}
