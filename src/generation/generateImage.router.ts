import { type Request, type Response, Router } from 'express';
import type { operations } from '../../generated/gateway';
import { abortOnDisconnect } from '../http/abort-on-disconnect';
import { setRateLimitHeaders } from '../ratelimit/rate-limiter';
import { type GenerationService, generationSummary } from './generation.service';

type Body = operations['generateImage']['requestBody']['content']['application/json'];
type Generated = operations['generateImage']['responses']['200']['content']['application/json'];

export function generateImageRouter(generation: GenerationService): Router {
  return Router().post('/images/generate', async (req: Request<object, Generated, Body>, res: Response<Generated>) => {
    const key = res.locals.apiKey;
    if (!key) throw new Error('generateImage reached without an authenticated key');
    const outcome = await generation.generateForKey(key, req.body, abortOnDisconnect(res), (decision) => setRateLimitHeaders(res, decision));
    res.json({
      ...generationSummary(outcome),
      usage: { images: outcome.images.length, credits_charged: outcome.credits, credits_remaining: outcome.creditsRemaining },
    });
  });
}
