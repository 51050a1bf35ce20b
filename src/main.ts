import { ConfigError, loadConfig } from './config/config';
import { DependencyStartupError } from './health/readiness';
import { startGateway } from './server';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`Configuration error: ${error.message}`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
  const gateway = await startGateway(config).catch((error: unknown) => {
    if (!(error instanceof DependencyStartupError)) throw error;
    console.error(`Startup error: ${error.message}`);
    process.exit(78); // EX_CONFIG: the environment points at something that is not there
  });
  const shutdown = (signal: string) => {
    gateway.logger.info({ signal }, 'shutting down');
    gateway.close().then(
      () => gateway.logger.flush(() => process.exit(0)),
      (error: unknown) => {
        gateway.logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
