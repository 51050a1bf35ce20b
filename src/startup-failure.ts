import { ConfigError } from './config/config';
import { DependencyStartupError } from './health/readiness';

/** EX_CONFIG from sysexits.h: the process manager should not restart into the same mistake. */
export const EXIT_CONFIG = 78;
/** EX_UNAVAILABLE: something the gateway needs (a port, a directory) is not available now. */
export const EXIT_UNAVAILABLE = 69;

interface SystemError extends Error {
  code: string;
  syscall?: string;
  address?: string;
  port?: number;
  path?: string;
}

function isSystemError(error: unknown): error is SystemError {
  return error instanceof Error && typeof (error as SystemError).code === 'string';
}

/**
 * One line for a failure an operator can fix (configuration, a port in use, a directory that cannot
 * be written: any failed system call), and the exit code for it; undefined for anything else,
 * which is a bug and keeps its stack.
 */
export function describeStartupFailure(error: unknown): { line: string; exitCode: number } | undefined {
  if (error instanceof ConfigError) return { line: `creative-gateway: configuration error: ${error.message}`, exitCode: EXIT_CONFIG };
  // PostgreSQL or Redis still unreachable after DEPENDENCY_STARTUP_TIMEOUT_MS of retries.
  if (error instanceof DependencyStartupError) return { line: `Startup error: ${error.message}`, exitCode: EXIT_CONFIG };
  if (!isSystemError(error)) return undefined;
  const where = error.port === undefined ? '' : `${error.address ?? ''}:${error.port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return {
        line: `creative-gateway: cannot listen on ${where}: the port is already in use (set PORT / INTERNAL_PORT, or stop the other process)`,
        exitCode: EXIT_UNAVAILABLE,
      };
    case 'EADDRNOTAVAIL':
      return { line: `creative-gateway: cannot listen on ${where}: no such local address (check HOST)`, exitCode: EXIT_CONFIG };
    case 'SQLITE_CANTOPEN':
      return { line: `creative-gateway: cannot open the SQLite database: ${error.message} (check DATABASE_URL and its directory)`, exitCode: EXIT_UNAVAILABLE };
    default:
      // Any other failed system call (permission denied, a path that is a file, a full disk, a
      // privileged port, ...) or SQLite refusal: its own message names the call and the path.
      if (error.syscall !== undefined || error.code.startsWith('SQLITE_')) {
        return { line: `creative-gateway: cannot start: ${error.message}`, exitCode: EXIT_UNAVAILABLE };
      }
      return undefined;
  }
}
