import { ApiError } from '../../src/errors/api-error';
import { modelSpecOfEntry } from '../../src/providers/formats';
import { imageOptionsFor } from '../../src/providers/model-spec';

/**
 * The output options of a request (OpenAI's `background`, `output_format`, …) against the model row
 * of its catalog entry (model-spec.ts imageOptionsFor): what the generation service checks before the
 * reservation and the wire client sends.
 */
describe('imageOptionsFor', () => {
  const spec = (upstream_model: string) => modelSpecOfEntry({ provider: 'openai', upstream_model });
  const refusal = (run: () => unknown) => {
    try {
      run();
    } catch (error) {
      expect(error).toBeInstanceOf(ApiError);
      return { code: (error as ApiError).code, param: (error as ApiError).param };
    }
    throw new Error('not refused');
  };

  it('sends what the model documents for the endpoint, leaves out the rest', () => {
    const options = {
      background: 'transparent',
      output_format: 'webp',
      output_compression: 80,
      moderation: 'low',
      style: 'vivid',
      input_fidelity: 'high',
      quality: 'high',
    };
    // Generations: no input_fidelity (edits only), no style (dall-e-3 only).
    expect(imageOptionsFor('gpt-image-1', spec('gpt-image-1'), options, false)).toEqual({
      background: 'transparent',
      output_format: 'webp',
      output_compression: 80,
      moderation: 'low',
      quality: 'high',
    });
    // Edits: no moderation (OpenAI's edits take none); input_fidelity on gpt-image-1, not on gpt-image-1-mini.
    expect(imageOptionsFor('gpt-image-1', spec('gpt-image-1'), options, true)).toEqual({
      background: 'transparent',
      output_format: 'webp',
      output_compression: 80,
      input_fidelity: 'high',
      quality: 'high',
    });
    expect(imageOptionsFor('gpt-image-1-mini', spec('gpt-image-1-mini'), options, true)).not.toHaveProperty('input_fidelity');
    expect(imageOptionsFor('dall-e-3', spec('dall-e-3'), { ...options, quality: 'hd' }, false)).toEqual({ style: 'vivid', quality: 'hd' });
  });

  it('a documented option with a value the model does not take is 400 invalid_request naming it', () => {
    expect(refusal(() => imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { background: 'blue' }, false))).toEqual({
      code: 'invalid_request',
      param: 'background',
    });
    expect(refusal(() => imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { output_compression: 101 }, false))).toEqual({
      code: 'invalid_request',
      param: 'output_compression',
    });
    expect(refusal(() => imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { output_compression: 'high' }, false))).toEqual({
      code: 'invalid_request',
      param: 'output_compression',
    });
    expect(refusal(() => imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { input_fidelity: 'medium' }, true))).toEqual({
      code: 'invalid_request',
      param: 'input_fidelity',
    });
    expect(refusal(() => imageOptionsFor('dall-e-3', spec('dall-e-3'), { style: 'bold' }, false))).toEqual({ code: 'invalid_request', param: 'style' });
  });

  it('a value on an endpoint that does not read the option is not checked (it is not sent)', () => {
    expect(imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { moderation: 'strict' }, true)).toEqual({});
    expect(imageOptionsFor('gpt-image-1-mini', spec('gpt-image-1-mini'), { input_fidelity: 'medium' }, true)).toEqual({});
  });

  it('background transparent needs output_format png or webp', () => {
    expect(refusal(() => imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { background: 'transparent', output_format: 'jpeg' }, false))).toEqual({
      code: 'invalid_request',
      param: 'background',
    });
    expect(imageOptionsFor('gpt-image-1', spec('gpt-image-1'), { background: 'transparent' }, false)).toEqual({ background: 'transparent' });
  });

  it('a model without rules (or none the tables know) takes nothing and refuses nothing', () => {
    expect(
      imageOptionsFor(
        'jimeng-4.5',
        modelSpecOfEntry({ provider: 'jimeng', transport: 'ark', upstream_model: 'doubao-seedream-4-5-251128' }),
        { background: 'blue' },
        false,
      ),
    ).toEqual({});
    expect(imageOptionsFor('custom', undefined, { background: 'blue', output_compression: 500 }, false)).toEqual({});
  });
});
