import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import type { TestGateway } from './test-gateway';

/** The official OpenAI client on the gateway's /v1 with a client key; no retries, so each refusal is seen as sent. */
export const openaiClient = (t: TestGateway, apiKey: string) => new OpenAI({ baseURL: `${t.gateway.url}/v1`, apiKey, maxRetries: 0 });

/** An answer asked for as b64_json holds exactly one image, and it is a PNG. */
export function expectOnePng(answer: OpenAI.Images.ImagesResponse): void {
  expect(answer.data).toHaveLength(1);
  expect(Buffer.from(answer.data![0]!.b64_json!, 'base64').subarray(1, 4).toString()).toBe('PNG');
}

/**
 * `client.images.edit` of the official SDK run `attempts` times in a Node process of its own, as a
 * client is: in the test's own process the gateway and the SDK share one event loop, and the SDK
 * reads an early answer before it notices a reset. Resolves with each call's outcome: `succeeded`,
 * or the error's class, status, code and param.
 */
export async function editInOwnProcess(t: TestGateway, apiKey: string, images: Buffer[], attempts: number): Promise<string[]> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-sdk-'));
  try {
    const files = images.map((bytes, i) => {
      const file = path.join(directory, `${i}.png`);
      fs.writeFileSync(file, bytes);
      return file;
    });
    const script = `
      import fs from 'node:fs';
      import path from 'node:path';
      import OpenAI, { toFile } from 'openai';
      const { baseURL, apiKey, files, attempts } = JSON.parse(process.env.SDK_CALL);
      const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
      const outcomes = [];
      for (let i = 0; i < attempts; i++) {
        const image = await Promise.all(files.map((file) => toFile(fs.readFileSync(file), path.basename(file), { type: 'image/png' })));
        outcomes.push(await client.images.edit({ image, prompt: 'x', model: 'local-1', size: '32x32' }).then(
          () => 'succeeded',
          (error) => [error.constructor.name, error.status, error.code, error.param].filter((part) => part !== undefined && part !== null).join(' '),
        ));
      }
      console.log(JSON.stringify(outcomes));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: path.resolve(__dirname, '../..'),
      env: { ...process.env, SDK_CALL: JSON.stringify({ baseURL: `${t.gateway.url}/v1`, apiKey, files, attempts }) },
    });
    return JSON.parse(stdout) as string[];
  } finally {
    fs.rmSync(directory, { recursive: true, force: true });
  }
}
