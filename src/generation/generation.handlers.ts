import type { GatewayHandlers } from '../http/handler-maps';
import { type GenerationService, generationSummary } from './generation.service';

type GenerationHandlers = Pick<GatewayHandlers, 'generateImage' | 'createImageOpenAI'>;

/** The client generation operations: the gateway's own shape and OpenAI's. */
export function generationHandlers(generation: GenerationService): GenerationHandlers {
  return {
    generateImage: async ({ principal, body, signal }) => {
      const outcome = await generation.generateForKey(principal.key, body, signal);
      return {
        status: 200,
        rateLimit: outcome.rateLimit,
        body: {
          ...generationSummary(outcome),
          usage: { images: outcome.images.length, credits_charged: outcome.credits, credits_remaining: outcome.creditsRemaining },
        },
      };
    },

    // OpenAI's `POST /v1/images/generations`, mapped onto the gateway's own generation.
    createImageOpenAI: async ({ principal, body, signal }) => {
      const { prompt, model, n, size, response_format } = body;
      const outcome = await generation.generateForKey(
        principal.key,
        { prompt, model, n, response_format, ...(size && size !== 'auto' ? { size } : {}) },
        signal,
      );
      return {
        status: 200,
        rateLimit: outcome.rateLimit,
        body: {
          created: outcome.created,
          data: outcome.images.map((image) => ({
            ...(image.url !== undefined ? { url: image.url } : {}),
            ...(image.b64Json !== undefined ? { b64_json: image.b64Json } : {}),
            revised_prompt: prompt,
          })),
        },
      };
    },
  };
}
