import { type Request, type Response, Router } from 'express';
import type { operations } from '../../generated/creative';
import { type GenerationService, generationSummary } from '../generation/generation.service';
import { abortOnDisconnect } from '../http/abort-on-disconnect';

type Body = operations['createGeneration']['requestBody']['content']['application/json'];
type Generated = operations['createGeneration']['responses']['200']['content']['application/json'];

export function createGenerationRouter(generation: GenerationService): Router {
  return Router().post('/api/v1/creative/images/generations', async (req: Request<object, Generated, Body>, res: Response<Generated>) => {
    const clientId = res.locals.serviceClientId;
    if (!clientId) throw new Error('createGeneration reached without a service token');
    const outcome = await generation.generateForService(clientId, req.body, abortOnDisconnect(res));
    res.json({ ...generationSummary(outcome), usage: { images: outcome.images.length, credits: outcome.credits } });
  });
}
