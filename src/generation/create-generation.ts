import { InputImages } from '../images/inputs/input-images';
import type { PromptRetention } from '../maintenance/prompt-retention';
import type { CursorCodec } from '../shared/cursor';
import { AdminGenerations } from './admin-generations';
import { ClientGenerations } from './client-generations';
import { CompletionWebhooks } from './completion-webhooks';
import { GenerationResources } from './generation-resource';
import { GenerationRunner } from './generation-runner';
import { GenerationWorker, type GenerationWorkerDeps, newLeaseOwner } from './generation-worker';
import { type GenerationDeps, GenerationService } from './generation.service';

export interface GenerationFeatureDeps extends Omit<GenerationDeps, 'worker' | 'inputs' | 'runner'> {
  worker: Pick<GenerationWorkerDeps, 'pollMs' | 'maxRunning' | 'modelsWithRoom'>;
  /** Signs and opens the generation lists' page cursors. */
  cursors: CursorCodec;
  /** PROMPT_RETENTION: what a generation resource shows of a prompt whose project sets no policy. */
  promptRetention?: PromptRetention;
}

/** The generation feature's parts, each handed to the handlers that use it. */
export interface GenerationFeature {
  /** Admits, reserves and runs (or queues) new generations. */
  service: GenerationService;
  /** The key holder's view of its generations (GET, list, cancel, waiting for a settlement). */
  clients: ClientGenerations;
  /** Every key's generations, for administrators. */
  admin: AdminGenerations;
  resources: GenerationResources;
  completionWebhooks: CompletionWebhooks | undefined;
  worker: GenerationWorker;
  close(): Promise<void>;
}

/**
 * The generation feature, wired in dependency order: the runner first (what a run is), then the
 * worker that runs claimed rows with it, then the service that admits, reserves and hands rows to
 * the worker, and the views of generations already made. The worker's lease owner is chosen here,
 * so the runner marks its sends with it. The worker is started by the caller once the gateway
 * listens (a takeover's images need its public URL).
 */
export function createGeneration(deps: GenerationFeatureDeps): GenerationFeature {
  const { db, writes, clock, logger, leaseMs, cursors } = deps;
  const owner = newLeaseOwner();
  const inputs = new InputImages({ images: deps.images });
  const resources = new GenerationResources({ db, clock, images: deps.images, ...(deps.promptRetention ? { promptRetention: deps.promptRetention } : {}) });
  const completionWebhooks = deps.webhooks && new CompletionWebhooks({ db, clock, ...deps.webhooks, resource: (trx, row) => resources.resource(row, trx) });
  const runner = new GenerationRunner({ ...deps, owner, completionWebhooks, inputs });
  const worker = new GenerationWorker({
    db,
    clock,
    logger,
    leaseMs,
    owner,
    ...deps.worker,
    execute: (row, signal) => runner.execute(row, signal),
  });
  const service = new GenerationService({ ...deps, worker, inputs, runner }, completionWebhooks);
  const clients = new ClientGenerations({
    db,
    writes,
    clock,
    cursors,
    resources,
    worker,
    ...(completionWebhooks ? { onSettled: (trx, id) => completionWebhooks.emit(trx, id), afterSettled: () => completionWebhooks.poke() } : {}),
  });
  const admin = new AdminGenerations({ db, clock, cursors, clients, resources });
  return { service, clients, admin, resources, completionWebhooks, worker, close: () => worker.stop() };
}
