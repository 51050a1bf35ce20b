import { CommanderError } from 'commander';
import { ApiCallError, UsageError } from './admin-client';
import { buildProgram, EXIT_API_ERROR, EXIT_USAGE, exitCodeOf } from './program';

/**
 * `npx creative-gateway <resource> <command>`: the admin API from a terminal. Talks HTTP to a running
 * gateway; see `creative-gateway --help` for commands, options and exit codes.
 */
export async function run(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return exitCodeOf(error);
    if (error instanceof UsageError) {
      console.error(`error: ${error.message}`);
      return EXIT_USAGE;
    }
    if (error instanceof ApiCallError) {
      console.error(`error: ${error.message}`);
      return EXIT_API_ERROR;
    }
    throw error;
  }
}

export function main(): void {
  run(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = EXIT_API_ERROR;
    },
  );
}
