import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ADMIN_SECRET, type TestGateway } from '../helpers/test-gateway';

export const BIN = path.resolve(__dirname, '../../bin/creative-gateway.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** The child's argv as the OS shows it (/proc/<pid>/cmdline, what `ps` prints), read while it ran. */
  cmdline: string;
}

export interface CliOptions {
  /** Environment beside PATH and GATEWAY_URL; ADMIN_SECRET is the test gateway's unless given. */
  env?: Record<string, string>;
  /** Written to the CLI's stdin (which is then closed); stdin is closed at once without it. */
  stdin?: string;
}

/** Runs the real bin script against the test gateway (asynchronously: the gateway lives in this process). */
export function cliRunner(t: () => TestGateway) {
  async function cli(args: string[], options: CliOptions = {}): Promise<CliResult> {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH, GATEWAY_URL: t().gateway.url, ADMIN_SECRET, ...options.env },
    });
    let cmdline = '';
    try {
      cmdline = fs.readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').join(' ');
    } catch {
      // Not Linux: the arguments we passed are the process's arguments.
      cmdline = [process.execPath, BIN, ...args].join(' ');
    }
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end(options.stdin ?? '');
    const code = await new Promise<number>((resolve) => child.on('close', (exit) => resolve(exit ?? -1)));
    return { code, stdout, stderr, cmdline };
  }
  /** `--json` output parsed; throws with stderr when the CLI did not exit 0. */
  async function json(args: string[], options: CliOptions = {}) {
    const result = await cli([...args, '--json'], options);
    if (result.code !== 0) throw new Error(`${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }
  /** Asserts a usage error: message on stderr, nothing on stdout, exit 2. */
  async function usageError(args: string[], message: RegExp, options: CliOptions = {}) {
    const result = await cli(args, options);
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' });
    expect(result.stderr).toMatch(message);
  }
  /** Asserts help on stdout, exit 0. */
  async function help(args: string[]) {
    const result = await cli(args);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^Usage: creative-gateway/);
    return result.stdout;
  }
  return { cli, json, usageError, help };
}
