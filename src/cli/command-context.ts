import type { Command } from 'commander';
import type { AdminConnection } from './admin-client';
import type { Output } from './output';

/** What every command reads from the global options (--url, --json). */
export interface CommandContext {
  connection(command: Command): AdminConnection;
  output(command: Command): Output;
}
