import { MAX_UPSTREAM_TEXT, redactPrompt, redactUpstreamText } from '../../src/providers/redaction';
import { UpstreamError, upstream, withoutPrompt } from '../../src/providers/upstream-errors';
import { withheldEventPayload } from '../../src/maintenance/prompt-retention';

/**
 * What the gateway keeps of an upstream's text never holds the request's prompt, however the upstream
 * quoted it: with its whitespace changed, cut short, past the length the gateway keeps.
 */
describe('a quoted prompt is redacted before the text is cut or its whitespace collapsed', () => {
  const prompt = 'a lighthouse  on a cliff\nat dusk, oil painting with heavy brush strokes';

  it('finds the prompt whatever whitespace the quote has', () => {
    const quoted = 'the prompt "a lighthouse on a cliff at dusk, oil painting with heavy brush strokes" could not be processed';
    expect(redactPrompt(quoted, prompt)).toBe('the prompt "[prompt]" could not be processed');
    const squeezed = 'invalid input: alighthouseonacliffatdusk,oilpaintingwithheavybrushstrokes (code 7)';
    expect(redactPrompt(squeezed, prompt)).toBe('invalid input: [prompt] (code 7)');
    expect(redactPrompt('short "a red  fox" refused', 'a red\tfox')).toBe('short "[prompt]" refused');
  });

  it('removes a piece of a long prompt, the start the upstream kept before its own cut', () => {
    expect(redactPrompt('rejected: "a lighthouse on a cliff at du..."', prompt)).toBe('rejected: "[prompt]..."');
    // A piece from the middle, too.
    expect(redactPrompt('bad words near "oil painting with heavy brush"', prompt)).toBe('bad words near "[prompt]"');
  });

  it('works on prompts outside ASCII (CJK, emoji, invisible characters)', () => {
    const cjk = '一只在悬崖上的灯塔，黄昏时分，油画风格，厚重的笔触🎨';
    expect(redactPrompt(`提示词 "一只在悬崖上的灯塔， 黄昏时分，油画风格" 不合规`, cjk)).toBe('提示词 "[prompt]" 不合规');
    expect(redactPrompt(`quoted: ${cjk} end`, cjk)).toBe('quoted: [prompt] end');
    expect(redactPrompt('a\u200blighthouse on a cliff\u2003at dusk', 'a lighthouse on a cliff at dusk')).toBe('[prompt]');
  });

  it('leaves ordinary text, and very short prompts, alone', () => {
    expect(redactPrompt('HTTP 500 internal error', prompt)).toBe('HTTP 500 internal error');
    expect(redactPrompt('a cat sat', 'a cat')).toBe('a cat sat');
  });

  it('redacts a prompt quoted past MAX_UPSTREAM_TEXT before cutting, leaving no piece of it', () => {
    const words = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');
    const text = `Provider x failed: HTTP 400 ${'padding '.repeat(50)}the prompt "${words.replace(/ /g, '\n  ')}" is too long`;
    const kept = redactUpstreamText(text, [], { prompt: words });
    expect(kept).toContain('[prompt]');
    expect(kept).toContain('is too long');
    expect(kept).not.toMatch(/word\d/);
    expect(kept.length).toBeLessThanOrEqual(MAX_UPSTREAM_TEXT);
  });

  it('withoutPrompt redacts from what the upstream said, not from the message already cut', () => {
    const words = Array.from({ length: 200 }, (_, i) => `token${i}`).join(' ');
    // The client collapses whitespace and the message is cut at 500 characters inside the quote.
    const error = upstream.failed('openai', `HTTP 400 the prompt '${words}' is invalid`, { accountProblem: `your prompt ${words} is not allowed` });
    expect(error.message).toContain('token0 token1');
    const clean = withoutPrompt(error, words) as UpstreamError;
    expect(clean).toBeInstanceOf(UpstreamError);
    expect(clean.message).toBe("Provider openai failed: HTTP 400 the prompt '[prompt]' is invalid");
    expect(clean.traits.accountProblem).toBe('your prompt [prompt] is not allowed');
    expect(clean.stack).not.toMatch(/token\d/);
    // Not quoted: the same error.
    const other = upstream.failed('openai', 'HTTP 500 oops');
    expect(withoutPrompt(other, words)).toBe(other);
  });

  it('a completion event withheld: no prompt, its hash under hash, no quote in its texts', () => {
    const payload = JSON.stringify({
      type: 'generation.failed',
      timestamp: '2026-12-01T00:00:00.000Z',
      data: { id: 'gen_1', prompt, prompt_sha256: null, prompt_retention: 'full', error: { code: 'provider_error', message: `quoted ${prompt}` } },
    });
    const none = JSON.parse(withheldEventPayload(payload, 'none', [])) as { data: Record<string, unknown> };
    expect(none.data).toMatchObject({ prompt: null, prompt_sha256: null, prompt_retention: 'none', error: { message: 'quoted [prompt]' } });
    const hash = JSON.parse(withheldEventPayload(payload, 'hash', [])) as { data: Record<string, unknown> };
    expect(hash.data.prompt_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(hash)).not.toContain('lighthouse');
  });
});
