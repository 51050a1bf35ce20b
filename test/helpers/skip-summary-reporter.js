// A jest reporter: at the end of a run, the tests it skipped, per file, with the reason the file
// recorded (test/helpers/skip-reasons.ts), so that a green run says what it did not check.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const DIRECTORY_VARIABLE = 'CGW_SKIP_REASONS_DIR';
const UNRECORDED = 'a condition of the file itself (most: tests for the other engine, which its other integration project runs)';

class SkipSummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    // Workers are forked after reporters are made: they inherit the variable.
    this.directory = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-skips-'));
    process.env[DIRECTORY_VARIABLE] = this.directory;
  }

  reasons() {
    const byFile = new Map();
    for (const name of fs.readdirSync(this.directory)) {
      for (const line of fs.readFileSync(path.join(this.directory, name), 'utf8').split('\n').filter(Boolean)) {
        const { file, reason } = JSON.parse(line);
        const reasons = byFile.get(file) ?? new Set();
        reasons.add(reason);
        byFile.set(file, reasons);
      }
    }
    return byFile;
  }

  onRunComplete(_contexts, results) {
    const recorded = this.reasons();
    fs.rmSync(this.directory, { recursive: true, force: true });
    const lines = [];
    let total = 0;
    for (const file of results.testResults) {
      const skipped = file.testResults.filter((test) => test.status === 'pending' || test.status === 'skipped' || test.status === 'todo').length;
      if (skipped === 0) continue;
      total += skipped;
      const reasons = recorded.get(file.testFilePath);
      const where = `${path.relative(this.rootDir, file.testFilePath)}${file.displayName ? ` (${file.displayName.name ?? file.displayName})` : ''}`;
      lines.push(`  ${skipped} in ${where}: ${reasons ? [...reasons].join('; ') : UNRECORDED}`);
    }
    if (total === 0) return;
    process.stderr.write(`\nSkipped ${total} test${total === 1 ? '' : 's'}, and why:\n${lines.sort().join('\n')}\n`);
  }
}

module.exports = SkipSummaryReporter;
