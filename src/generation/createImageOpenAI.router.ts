import { type Request, type Response, Router } from 'express';
import type { operations } from '../../generated/gateway';
import { abortOnDisconnect } from '../http/abort-on-disconnect';
import { setRateLimitHeaders } from '../ratelimit/rate-limiter';
import type { GenerationService } from './generation.service';

type Body = operations['createImageOpenAI']['requestBody']['content']['application/json'];
type Generated = operations['createImageOpenAI']['responses']['200']['content']['application/json'];

/** OpenAI's `POST /v1/images/generations`, mapped onto the gateway's own generation. */
export function createImageOpenAIRouter(generation: GenerationService): Router {
  return Router().post('/v1/images/generations', async (req: Request<object, Generated, Body>, res: Response<Generated>) => {
    const key = res.locals.apiKey;
    if (!key) throw new Error('createImageOpenAI reached without an authenticated key');
    const { prompt, model, n, size, response_format } = req.body;
    const outcome = await generation.generateForKey(
      key,
      { prompt, model, n, response_format, ...(size && size !== 'auto' ? { size } : {}) },
      abortOnDisconnect(res),
      (decision) => setRateLimitHeaders(res, decision),
    );
    res.json({
      created: outcome.created,
      data: outcome.images.map((image) => ({
        ...(image.url !== undefined ? { url: image.url } : {}),
        ...(image.b64Json !== undefined ? { b64_json: image.b64Json } : {}),
        revised_prompt: prompt,
      })),
    });
  });
}
