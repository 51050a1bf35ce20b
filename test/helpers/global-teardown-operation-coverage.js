// Global teardown of the SQLite integration tier: after a run of the whole tier, the operation coverage
// check (scripts/check-operation-coverage.mjs, docs/maintainers/test-tiers.md "Operation coverage") over
// what its test gateways answered. A run of some files or tests answers only part, so it is not checked.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const CHECK = path.resolve(__dirname, '../../scripts/check-operation-coverage.mjs');

/** Whether the run was narrowed to some files or tests (paths, -t, --onlyChanged, a shard, ...). */
function narrowed(globalConfig) {
  return (
    globalConfig.nonFlagArgs.length > 0 ||
    (globalConfig.testPathPatterns?.patterns?.length ?? 0) > 0 ||
    Boolean(globalConfig.testNamePattern) ||
    globalConfig.onlyChanged ||
    globalConfig.onlyFailures ||
    globalConfig.findRelatedTests ||
    Boolean(globalConfig.changedSince) ||
    globalConfig.lastCommit ||
    Boolean(globalConfig.shard) ||
    globalConfig.watch ||
    globalConfig.watchAll
  );
}

module.exports = async (globalConfig) => {
  if (narrowed(globalConfig)) return;
  try {
    execFileSync(process.execPath, [CHECK], { stdio: 'inherit' });
  } catch {
    throw new Error('the operation coverage check failed, above (docs/maintainers/test-tiers.md, "Operation coverage").');
  }
};
