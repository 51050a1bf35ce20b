import { ApiError } from '../errors/api-error';
import type { ReadinessService } from './readiness';

type Healthy = { status: 200; body: { status: 'ok' } };

/** Liveness (the process answers) and readiness (every dependency serves), on both listeners. */
export function healthHandlers(readiness: ReadinessService): { liveness: () => Healthy; readiness: () => Promise<Healthy> } {
  return {
    liveness: () => ({ status: 200, body: { status: 'ok' } }),
    readiness: async () => {
      const result = await readiness.check();
      if (!result.ready) throw new ApiError('not_ready', result.reason, { details: { dependency: result.dependency } });
      return { status: 200, body: { status: 'ok' } };
    },
  };
}
