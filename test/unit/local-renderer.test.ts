import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { LocalProvider } from '../../src/providers/local/local.provider';
import type { ProviderRequest } from '../../src/providers/provider';

const request = (overrides: Partial<ProviderRequest> = {}): ProviderRequest => ({
  prompt: 'a lighthouse at dawn',
  upstreamModel: 'local-1',
  n: 1,
  width: 256,
  height: 256,
  seed: 7,
  responseFormat: 'b64_json',
  ...overrides,
});

describe('the local renderer', () => {
  it('leaves the event loop free while it renders: other work runs between its slices', async () => {
    let turns = 0;
    let rendering = true;
    const probe = (async () => {
      while (rendering) {
        await nextTurn();
        turns += 1;
      }
    })();
    const images = await new LocalProvider().generate(request({ n: 4, width: 1024, height: 1024 }), new AbortController().signal);
    rendering = false;
    await probe;
    expect(images).toHaveLength(4);
    // 4 images of 1024 rows in slices of 32 rows: at least 31 turns each (rendered in one piece: 0-1).
    expect(turns).toBeGreaterThanOrEqual(4 * 31);
  });

  it('stops between slices when its request is aborted', async () => {
    const controller = new AbortController();
    const rendering = new LocalProvider().generate(request({ n: 4, width: 1024, height: 1024 }), controller.signal);
    await nextTurn();
    controller.abort(new Error('client went away'));
    await expect(rendering).rejects.toThrow('client went away');
  });

  it('is deterministic: the same prompt and seed give the same PNG, another seed another', async () => {
    const signal = new AbortController().signal;
    const digest = async (seed: number) =>
      createHash('sha256')
        .update((await new LocalProvider().generate(request({ seed }), signal))[0]!.b64Json!)
        .digest('hex');
    expect(await digest(7)).toBe(await digest(7));
    expect(await digest(7)).not.toBe(await digest(8));
  });
});
