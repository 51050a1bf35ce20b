import fs from 'node:fs';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import { adminConnection } from './admin-client';
import type { CommandContext } from './command-context';
import { registerAuditCommands } from './commands/audit';
import { registerCatalogCommands } from './commands/catalog';
import { registerChannelCommands } from './commands/channels';
import { registerKeyCommands } from './commands/keys';
import { registerProjectCommands } from './commands/projects';
import { registerTokenCommands } from './commands/tokens';
import { registerUsageCommands } from './commands/usage';
import { registerWebhookCommands } from './commands/webhooks';

/**
 * One register function per resource of the admin API; a new resource adds its module here and
 * gets --help, --json, --url and the exit codes for free.
 */
const RESOURCES: Array<(program: Command, context: CommandContext) => void> = [
  registerKeyCommands,
  registerProjectCommands,
  registerChannelCommands,
  registerWebhookCommands,
  registerTokenCommands,
  registerAuditCommands,
  registerUsageCommands,
  registerCatalogCommands,
];

/** Exit codes: 0 success and --help/--version, 1 the API refused or could not be reached, 2 usage. */
export const EXIT_API_ERROR = 1;
export const EXIT_USAGE = 2;

function version(): string {
  const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../../package.json'), 'utf8')) as { version: string };
  return manifest.version;
}

const JSON_HELP = "print the API's JSON answer (for scripts) instead of text";

/** The program (root) command, whose --url names the gateway. */
function root(command: Command): Command {
  return command.parent ? root(command.parent) : command;
}

export function buildProgram(): Command {
  const program = new Command('creative-gateway')
    .description("The Creative Gateway's admin API from a terminal.")
    .version(version(), '-V, --version', 'print the version')
    .option('--url <url>', 'the gateway (default: $GATEWAY_URL or http://localhost:8080); before the resource')
    .option('--json', JSON_HELP)
    // Program options go before the resource, so a command may have its own --url (webhooks create).
    .enablePositionalOptions()
    .helpOption('-h, --help', 'show help')
    .helpCommand(false)
    .showSuggestionAfterError(true)
    .addHelpText(
      'after',
      `
Environment:
  GATEWAY_URL    the gateway (default http://localhost:8080)
  ADMIN_TOKEN    a scoped admin token (hyadm_..., see \`tokens create\`); used instead of ADMIN_SECRET when both are set
  ADMIN_SECRET   the admin secret (default: ./data/admin-secret, written by the first \`npm start\`)

Exit codes: 0 done, 1 the API refused (its message on stderr) or could not be reached, or \`channels test\` failed, 2 usage error.`,
    );
  const context: CommandContext = {
    connection: (command) => adminConnection(root(command).opts<{ url?: string }>().url),
    output: (command) => ({ json: command.optsWithGlobals<{ json?: boolean }>().json === true }),
  };
  for (const register of RESOURCES) register(program, context);
  // Every command, at every level: usage errors go to stderr and exit 2, help and version exit 0.
  const configure = (command: Command) => {
    command.exitOverride().configureOutput({ writeErr: (text) => process.stderr.write(text), writeOut: (text) => process.stdout.write(text) });
    if (command.commands.length > 0 && command !== program) command.helpCommand(false);
    // --json also after the command (`keys list --json`), as every command takes it.
    if (command.commands.length === 0 && command !== program) command.option('--json', JSON_HELP);
    for (const sub of command.commands) configure(sub);
  };
  configure(program);
  return program;
}

/** Maps commander's own exits (help, version, usage errors) to ours. */
export function exitCodeOf(error: CommanderError): number {
  return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || (error.code === 'commander.help' && error.exitCode === 0)
    ? 0
    : EXIT_USAGE;
}
