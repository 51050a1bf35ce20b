import { createLogger } from '../../src/logger';

/** The logger censors prompts and bodies wherever a line's object carries them, at every level. */
describe('the logger keeps prompts out of every line', () => {
  it('censors prompt fields and bodies to three levels deep, at trace as at fatal', () => {
    const lines: string[] = [];
    const logger = createLogger('trace', { write: (line: string) => lines.push(line) });
    const marker = 'zq-logger-prompt-5c1d';
    logger.trace({ prompt: marker }, 'top');
    logger.debug({ request: { prompt: marker, negativePrompt: marker } }, 'nested');
    logger.info({ generation: { request: { prompt: marker } } }, 'deeper');
    logger.warn({ req: { body: { prompt: marker } } }, 'body');
    logger.error({ data: [{ revised_prompt: marker }], input: { negative_prompt: marker } }, 'revised');
    logger.fatal({ body: marker }, 'fatal');
    expect(lines).toHaveLength(6);
    expect(lines.filter((line) => line.includes(marker))).toEqual([]);
    expect(lines[0]).toContain('"prompt":"[redacted]"');
  });
});
