import type { DatabaseEngine } from '../db/database';
import { InputImages } from '../images/inputs/input-images';
import { CompletionWebhooks } from './completion-webhooks';
import { GenerationResources } from './generation-resource';
import { GenerationRunner } from './generation-runner';
import { GenerationWorker, type GenerationWorkerDeps, newLeaseOwner } from './generation-worker';
import { type GenerationDeps, GenerationService } from './generation.service';

export interface GenerationFeatureDeps extends Omit<GenerationDeps, 'worker' | 'inputs'> {
  engine: DatabaseEngine;
  worker: Pick<GenerationWorkerDeps, 'pollMs' | 'maxRunning' | 'modelsWithRoom'>;
}

/**
 * The generation feature, wired in dependency order: the runner first (what a run is), then the
 * worker that runs claimed rows with it, then the service that admits, reserves and hands rows to
 * the worker. The worker's lease owner is chosen here, so the runner marks its sends with it. The
 * worker is started by the caller once the gateway listens (a takeover's images need its public URL).
 */
export function createGeneration(deps: GenerationFeatureDeps): { service: GenerationService; worker: GenerationWorker; close: () => Promise<void> } {
  const { db, clock, logger, leaseMs } = deps;
  const owner = newLeaseOwner();
  const inputs = new InputImages({ images: deps.images });
  const resources = new GenerationResources({ db, clock, images: deps.images });
  const completionWebhooks = deps.webhooks && new CompletionWebhooks({ clock, ...deps.webhooks, resource: (trx, row) => resources.resource(row, trx) });
  const runner = new GenerationRunner({ ...deps, owner, completionWebhooks, inputs });
  const worker = new GenerationWorker({ db, engine: deps.engine, clock, logger, leaseMs, owner, ...deps.worker, execute: (row, signal) => runner.execute(row, signal) });
  const service = new GenerationService({ ...deps, worker, inputs }, { runner, resources, completionWebhooks });
  return { service, worker, close: () => worker.stop() };
}
