import { GenerationSteps } from '../../src/generation/generation-steps';

/** The mechanics of a generation path (src/generation/generation-steps.ts): state, order, releases. */
describe('generation steps', () => {
  function path(log: string[], failAt?: string) {
    const step = (name: string) => () => {
      log.push(name);
      if (name === failAt) throw new Error(`${name} refused`);
    };
    return GenerationSteps.from<{ n: number }>()
      .then('double', ({ n }) => ({ doubled: n * 2 }), { by: 'nothing' })
      .then('hold a', async () => (log.push('hold a'), { a: 'held a' }), { release: async ({ a }) => void log.push(`release ${a}`) })
      .then('check', step('check'), { by: 'nothing' })
      .then('hold b', () => (log.push('hold b'), { b: 'held b' }), { release: async ({ b }) => void log.push(`release ${b}`) })
      .then('finish', step('finish'), { by: 'nothing' });
  }

  it('runs its steps in order, each seeing what the steps before it added, and releases what they held in reverse once it ends', async () => {
    const log: string[] = [];
    const steps = path(log);
    expect(steps.names).toEqual(['double', 'hold a', 'check', 'hold b', 'finish']);
    await expect(steps.run({ n: 21 })).resolves.toEqual({ n: 21, doubled: 42, a: 'held a', b: 'held b' });
    expect(log).toEqual(['hold a', 'check', 'hold b', 'finish', 'release held b', 'release held a']);
  });

  it('stops at the first step that throws, releasing only the holds taken before it, and throws its error', async () => {
    const log: string[] = [];
    await expect(path(log, 'check').run({ n: 1 })).rejects.toThrow('check refused');
    expect(log).toEqual(['hold a', 'check', 'release held a']);
  });
});
