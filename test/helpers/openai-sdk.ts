import OpenAI from 'openai';
import type { TestGateway } from './test-gateway';

/** The official OpenAI client on the gateway's /v1 with a client key; no retries, so each refusal is seen as sent. */
export const openaiClient = (t: TestGateway, apiKey: string) => new OpenAI({ baseURL: `${t.gateway.url}/v1`, apiKey, maxRetries: 0 });

/** An answer asked for as b64_json holds exactly one image, and it is a PNG. */
export function expectOnePng(answer: OpenAI.Images.ImagesResponse): void {
  expect(answer.data).toHaveLength(1);
  expect(Buffer.from(answer.data![0]!.b64_json!, 'base64').subarray(1, 4).toString()).toBe('PNG');
}
