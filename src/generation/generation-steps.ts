import { tracingEnabled, withSpan } from '../telemetry/tracing';

/**
 * How a step's work is undone should the request end: `release`, called as the request ends
 * however it ends (what it holds only while the request runs), or `by`, naming what undoes it
 * elsewhere (or why nothing need be).
 */
export type Undo<S> = { release: (state: S) => Promise<void> } | { by: string };

interface Step {
  name: string;
  run: (state: object) => Promise<object | void> | object | void;
  undo: Undo<object>;
}

/**
 * A generation path as named steps, in order, each with its undo. Each step reads what the steps
 * before it added to the request's state and returns what it adds; the first to throw ends the
 * path, and the releases of the steps that ran are called in reverse order, as they would be had it
 * finished.
 */
export class GenerationSteps<I extends object, S extends object = I> {
  private constructor(private readonly steps: readonly Step[]) {}

  /** A path that starts from what its caller gives (`I`). */
  static from<I extends object>(): GenerationSteps<I> {
    return new GenerationSteps<I>([]);
  }

  then<A extends object | void>(name: string, run: (state: S) => Promise<A> | A, undo: Undo<S & Added<A>>): GenerationSteps<I, S & Added<A>> {
    return new GenerationSteps<I, S & Added<A>>([...this.steps, { name, run: run as Step['run'], undo: undo as Undo<object> }]);
  }

  /** The steps' names, in order. */
  get names(): string[] {
    return this.steps.map((step) => step.name);
  }

  async run(start: I): Promise<S> {
    let state: object = start;
    const releases: Array<() => Promise<void>> = [];
    try {
      for (const step of this.steps) {
        // With tracing, each step is a span named after it (admit, moderate, reserve, run, ...).
        const added = tracingEnabled()
          ? await withSpan(`generation ${step.name}`, { 'gateway.step': step.name }, async () => step.run(state))
          : await step.run(state);
        state = { ...state, ...(added ?? {}) };
        const { undo } = step;
        if ('release' in undo) {
          const held = state;
          releases.unshift(() => undo.release(held));
        }
      }
      return state as S;
    } finally {
      for (const release of releases) await release();
    }
  }
}

type Added<A> = A extends object ? A : object;
