import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type GatewayProcess, startGatewayProcess } from './gateway-process';

/**
 * Stands first on the shell's PATH as `curl`: runs the real one unchanged and appends the HTTP status of
 * each call (its last status line) to $CURL_CODES, so the test sees every call's status whatever it prints.
 */
export const curlRecorder = (realCurl: string) => `#!/bin/bash
headers=$(mktemp)
${JSON.stringify(realCurl)} -D "$headers" "$@"
status=$?
grep -a '^HTTP/' "$headers" | tail -n 1 | cut -d' ' -f2 >> "$CURL_CODES"
rm -f "$headers"
exit $status
`;

/** One bash, as a terminal the reader pastes into: variables carry over from block to block. */
export class PastingShell {
  private output = '';
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly exited: Promise<number>;

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['--noprofile', '--norc'], { cwd, env });
    this.child.stdout.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stderr.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
    // One stream in order; a command that fails ends the shell (the reader would see its error), and says which.
    this.child.stdin.write(`exec 2>&1; set -e; trap 'echo "failed ($?): $BASH_COMMAND"' ERR\n`);
  }

  /** Runs the script file as pasted; its exit status (the shell's, when a command failed) and what it printed. */
  async paste(file: string): Promise<{ status: number; output: string }> {
    const start = this.output.length;
    const marker = `block-done-${randomBytes(6).toString('hex')}`;
    this.child.stdin.write(`source ${JSON.stringify(file)}; echo "${marker} $?"\n`);
    const status = await new Promise<number>((resolve) => {
      const onData = () => {
        const done = new RegExp(`${marker} (\\d+)`).exec(this.output.slice(start));
        if (!done) return;
        this.child.stdout.off('data', onData);
        resolve(Number(done[1]));
      };
      this.child.stdout.on('data', onData);
      void this.exited.then(resolve);
    });
    return { status, output: this.output.slice(start).replace(new RegExp(`${marker} \\d+\\n?`), '') };
  }

  close(): Promise<number> {
    this.child.stdin.end();
    return this.exited;
  }
}

/** A gateway process as `npm start` runs on a fresh clone, in a directory of its own, with a curl that records each answer's status. */
export interface FreshCloneGateway {
  /** Where it runs (node_modules linked in): its ./data is the clone's. */
  directory: string;
  /** Holds the recording `curl`: put it first on PATH. */
  tools: string;
  /** Where the recording curl appends each status code. */
  codesFile: string;
  gateway: GatewayProcess;
}

export async function startFreshCloneGateway(prefix: string): Promise<FreshCloneGateway> {
  const root = path.resolve(__dirname, '../..');
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  const tools = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-tools-`));
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(directory, 'node_modules'));
  const realCurl = execFileSync('bash', ['-c', 'command -v curl']).toString().trim();
  fs.writeFileSync(path.join(tools, 'curl'), curlRecorder(realCurl), { mode: 0o755 });
  // Nothing configured: the secrets are generated into ./data, as on a fresh clone.
  const gateway = await startGatewayProcess(
    {
      NODE_ENV: undefined,
      ADMIN_SECRET: undefined,
      CF_ACCESS_CLIENT_ID: undefined,
      CF_ACCESS_CLIENT_SECRET: undefined,
      IMAGE_URL_SIGNING_KEY: undefined,
      CHANNEL_SEALING_KEY: undefined,
      IMAGE_DIRECTORY: undefined,
      CHANNEL_ALLOW_PRIVATE_UPSTREAMS: undefined,
    },
    { cwd: directory },
  );
  return { directory, tools, codesFile: path.join(tools, 'codes'), gateway };
}
