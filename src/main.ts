// First: refuses an unsupported Node.js before anything native loads (see the module).
import './require-supported-node';
import { loadConfig } from './config/config';
import { type RunningGateway, startGateway } from './server';
import { describeListening } from './startup-announcement';
import { describeStartupFailure } from './startup-failure';

/**
 * Ctrl-C in a terminal under `npm start` signals the whole foreground group, and npm forwards the
 * same SIGINT to us again: SIGINTs this close together are one key press, not a second one.
 */
const SAME_KEY_PRESS_MS = 500;

function handleSignals(gateway: RunningGateway): void {
  let firstSignalAt: number | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    const now = Date.now();
    if (firstSignalAt !== undefined) {
      // A second Ctrl-C means "now": the operator does not want to wait for the drain.
      if (signal === 'SIGINT' && now - firstSignalAt >= SAME_KEY_PRESS_MS) {
        gateway.logger.warn({ signal }, 'second interrupt: exiting without waiting for in-flight requests');
        gateway.logger.flush(() => process.exit(130));
      }
      return;
    }
    firstSignalAt = now;
    gateway.logger.info({ signal }, 'shutting down: draining in-flight requests (Ctrl-C again to exit at once)');
    gateway.close().then(
      () => gateway.logger.flush(() => process.exit(0)),
      (error: unknown) => {
        gateway.logger.error({ err: error }, 'shutdown failed');
        gateway.logger.flush(() => process.exit(1));
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

async function main(): Promise<void> {
  const config = loadConfig();
  const gateway = await startGateway(config);
  handleSignals(gateway);
  // A person at a terminal gets the URLs and models in words, below the JSON logs (which say the same).
  if (process.stdout.isTTY) {
    const lines = describeListening(gateway.listening.urls, gateway.listening.models);
    gateway.logger.flush(() => process.stdout.write(`${lines.join('\n')}\n`));
  }
}

main().catch((error: unknown) => {
  const failure = describeStartupFailure(error);
  if (failure) {
    console.error(failure.line);
    process.exit(failure.exitCode);
  }
  console.error(error);
  process.exit(1);
});
