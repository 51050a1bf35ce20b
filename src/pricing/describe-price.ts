import type { Price, PriceTerm } from './price';

const UNITS: Record<PriceTerm['meter'], string> = {
  image: 'per image',
  output_megapixel: 'per output megapixel',
  input_megapixel: 'per input megapixel',
  video_second: 'per second of video',
  input_token: 'per million input tokens',
  output_token: 'per million output tokens',
  call: 'per call',
};

function amount(price: Price, rate: number): string {
  return price.currency === 'USD' ? `$${rate}` : `${rate} credits`;
}

/** One term for people: `$0.015 per output megapixel (of 1,048,576 px, after the first)`. */
export function describeTerm(price: Price, term: PriceTerm): string {
  const megapixel = term.megapixel === undefined ? undefined : `of ${term.megapixel.toLocaleString('en-US')} px`;
  const included = term.included_megapixels ? `after the first ${term.included_megapixels === 1 ? '' : `${term.included_megapixels} `}`.trimEnd() : undefined;
  const conditions = [
    term.tier,
    term.quality,
    term.max_pixels === undefined ? undefined : `up to ${term.max_pixels.toLocaleString('en-US')} px`,
    term.resolution,
    term.audio === undefined ? undefined : term.audio ? 'with audio' : 'without audio',
    megapixel,
    included,
    term.meter.endsWith('megapixel') ? 'rounded up per image' : undefined,
  ].filter((c) => c !== undefined);
  return `${amount(price, term.rate)} ${UNITS[term.meter]}${conditions.length > 0 ? ` (${conditions.join(', ')})` : ''}`;
}

/** A whole price for people: its terms joined, its minimum, its source. */
export function describePrice(price: Price): string {
  const terms = price.terms.map((term) => describeTerm(price, term)).join('; ');
  const minimum = price.minimum_per_call === undefined ? '' : `; at least ${amount(price, price.minimum_per_call)} per call`;
  return `${terms}${minimum}`;
}
