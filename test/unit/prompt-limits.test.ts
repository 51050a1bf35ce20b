import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { GATEWAY_INPUT_LIMITS } from '../../src/images/inputs/input-limits';
import { checkPromptLength, DEFAULT_MAX_PROMPT_CHARS, LARGEST_PROMPT_CHARS, maxPromptChars } from '../../src/providers/model-spec';
import { UPSTREAM_MODELS } from '../../src/providers/upstream-models';
import { thrownApiError } from '../helpers/thrown-api-error';

type Schema = { maxLength?: number; properties?: Record<string, Schema>; content?: unknown };

describe('prompt limits per model', () => {
  it("the largest limit is the largest any model row documents (OpenAI's GPT image models: 32,000); others 4,000", () => {
    expect(Math.max(DEFAULT_MAX_PROMPT_CHARS, ...UPSTREAM_MODELS.map(maxPromptChars))).toBe(LARGEST_PROMPT_CHARS);
    const byMatch = new Map(UPSTREAM_MODELS.map((spec) => [spec.match, maxPromptChars(spec)]));
    expect(byMatch.get('gpt-image-1')).toBe(32_000);
    expect(byMatch.get('dall-e-3')).toBe(4000);
    expect(maxPromptChars(undefined)).toBe(DEFAULT_MAX_PROMPT_CHARS);
  });

  it("every prompt of the specs has the largest limit as its maxLength (the model's own is checked before anything is charged)", () => {
    const gateway = loadOpenApiDocument('gateway') as unknown as { components: { schemas: Record<string, Schema> } };
    const creative = loadOpenApiDocument('creative') as unknown as { components: { schemas: Record<string, Schema> } };
    const prompts = [
      gateway.components.schemas.GenerateImageRequest,
      gateway.components.schemas.OpenAIImageRequest,
      gateway.components.schemas.OpenAIImageEditRequest,
      creative.components.schemas.InternalGenerationRequest,
    ].map((schema) => schema?.properties?.prompt?.maxLength);
    expect(prompts).toEqual([LARGEST_PROMPT_CHARS, LARGEST_PROMPT_CHARS, LARGEST_PROMPT_CHARS, LARGEST_PROMPT_CHARS]);
  });

  it('an input image string may be as long as the body: its bytes are measured by the intake (413), not the validator', () => {
    const gateway = loadOpenApiDocument('gateway') as unknown as { components: { schemas: Record<string, Schema> } };
    expect(gateway.components.schemas.InputImage?.maxLength).toBe(GATEWAY_INPUT_LIMITS.maxBodyBytes);
  });

  it('counts characters as code points, as the spec does: 4,000 emoji (8,000 UTF-16 units) fit a 4,000 limit', () => {
    expect(() => checkPromptLength('m', '🎨'.repeat(4000), undefined)).not.toThrow();
    expect(thrownApiError(() => checkPromptLength('m', 'a'.repeat(4001), undefined))).toMatchObject({
      code: 'invalid_request',
      param: 'prompt',
      message: 'prompt: 4001 characters; model m takes at most 4000.',
    });
    expect(() => checkPromptLength('m', 'a'.repeat(32_000), { max_prompt_chars: 32_000 })).not.toThrow();
  });
});
