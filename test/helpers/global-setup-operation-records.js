// Global setup of the integration tiers: a fresh directory for the operation records the test gateways
// write (operation-recorder.ts), read after the tier by scripts/check-operation-coverage.mjs.
const fs = require('node:fs');
const path = require('node:path');

const OPERATION_RECORDS = path.resolve(__dirname, '../../test-artifacts/operation-records');

module.exports = async () => {
  fs.rmSync(OPERATION_RECORDS, { recursive: true, force: true });
  fs.mkdirSync(OPERATION_RECORDS, { recursive: true });
  // Inherited by the workers jest starts after global setup.
  process.env.OPERATION_RECORDS_DIR = OPERATION_RECORDS;
};
module.exports.OPERATION_RECORDS = OPERATION_RECORDS;
