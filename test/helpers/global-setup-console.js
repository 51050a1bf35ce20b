// Global setup of the browser tier (and part of global-setup.js): builds the operator console into
// dist/console (scripts/build-console.js, as `npm run build`) when its sources are newer than the build.
const { buildConsole, consoleIsStale } = require('../../scripts/build-console');

function buildConsoleIfStale() {
  if (!consoleIsStale()) return;
  const status = buildConsole();
  if (status !== 0) throw new Error(status === null ? 'Vite is not installed: cannot build the console' : `the console build failed (exit ${status})`);
}

module.exports = async () => buildConsoleIfStale();
module.exports.buildConsoleIfStale = buildConsoleIfStale;
