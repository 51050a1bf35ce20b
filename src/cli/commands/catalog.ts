import type { Command } from 'commander';
import { UsageError } from '../admin-client';

/**
 * `catalog`: the model catalog a gateway started with this environment would serve (the built-in one,
 * or what MODEL_CATALOG / MODEL_CATALOG_FILE make of it), as the JSON MODEL_CATALOG takes. Read from
 * the environment, not from a gateway: a starting point to copy, and a check of a catalog before a start.
 */
export function registerCatalogCommands(program: Command): void {
  program
    .command('catalog')
    .description("print the effective model catalog (this environment's MODEL_CATALOG / MODEL_CATALOG_FILE over the built-in one) as JSON")
    .action(async () => {
      // Loaded here: the other commands never need the configuration schema.
      const { catalogFromEnv } = await import('../../config/config');
      const { asWritten } = await import('../../config/catalog');
      let catalog;
      try {
        catalog = catalogFromEnv(process.env);
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
      process.stdout.write(`${JSON.stringify(catalog.map(asWritten), null, 2)}\n`);
    });
}
