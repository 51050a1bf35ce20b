import type { Response } from 'supertest';
import { type TestGateway, localRequest } from './test-gateway';
import { Traffic } from './throwaway-servers';

/** One client request during an outage test. */
export interface Seen {
  /** The test's phase when the request was sent, and when its answer came. */
  phase: string;
  answeredIn: string;
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
  images: number;
}

/**
 * `concurrency` clients generating with `key` until stopped, each request tagged with the phase
 * the test is in (`before`, `down`, ...), which the test moves on with `setPhase`.
 */
export function phasedTraffic(
  t: TestGateway,
  key: string,
  concurrency = 4,
  body: Record<string, unknown> = localRequest(),
): { traffic: Traffic<Seen>; setPhase(phase: string): void } {
  let phase = 'before';
  const traffic = new Traffic(async (): Promise<Seen> => {
    const sentIn = phase;
    const res: Response = await t.api.client(key, body);
    return {
      phase: sentIn,
      answeredIn: phase,
      status: res.status,
      code: res.body?.error?.code,
      retryAfter: res.headers['retry-after'],
      images: res.status === 200 ? (res.body.data as unknown[]).length : 0,
    };
  }, concurrency);
  return { traffic, setPhase: (next) => (phase = next) };
}

export const countIn = (results: Seen[], phase: string, status: number): number => results.filter((r) => r.phase === phase && r.status === status).length;

/** Every response was served or refused with the documented 503 (Retry-After 2), never anything else. */
export function expectOnlyServedOrDependency503(results: Seen[]): void {
  expect(results.filter((r) => r.status !== 200 && r.status !== 503)).toEqual([]);
  expect(results.filter((r) => r.status === 503 && (r.code !== 'dependency_unavailable' || r.retryAfter !== '2'))).toEqual([]);
}

export const imagesServed = (results: Seen[]): number => results.reduce((sum, r) => sum + r.images, 0);

/** The key paid for exactly the images served (1 credit each on local-1). */
export async function expectBooksBalance(t: TestGateway, keyId: string, results: Seen[], servedBefore = 0, creditsPerImage = 1): Promise<void> {
  expect(await t.api.creditsUsed(keyId)).toBe((servedBefore + imagesServed(results)) * creditsPerImage);
}
