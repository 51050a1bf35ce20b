import { DECIMAL_MEGAPIXEL, type Price, type PriceTerm } from './price';

export interface Pixels {
  width: number;
  height: number;
}

/**
 * What one generation is priced on: its outputs and inputs as measured (at settlement), or as
 * bounded (at reservation: the request's size for every image it asked for).
 */
export interface Metered {
  /** Output images, each with its pixels. */
  images: readonly Pixels[];
  /** The request's quality; `auto` or none is priced as none. */
  quality?: string | undefined;
  /** Input images the upstream bills (references, edit images, masks where billed). */
  inputImages?: readonly Pixels[];
  /** Seconds of video, at a resolution, with or without audio. */
  video?: { seconds: number; resolution?: string | undefined; audio?: boolean | undefined };
  /** Tokens as the upstream reports them (or their bound at reservation). */
  tokens?: { input?: number | undefined; output?: number | undefined };
  /** Upstream calls made (the `call` term and the per-call minimum). */
  calls: number;
}

function qualityOf(metered: Metered): string | undefined {
  return metered.quality === 'auto' ? undefined : metered.quality;
}

/** Whether `term` prices a quantity of this quality and size: a term naming a quality prices only that quality, one without only requests without one. */
function fits(term: PriceTerm, quality: string | undefined, pixels?: number): boolean {
  if ((term.quality as string | undefined) !== quality) return false;
  return term.max_pixels === undefined || pixels === undefined || pixels <= term.max_pixels;
}

/**
 * The term of `meter` that prices the quantity: the first that fits; else the meter's last term when
 * it names neither a quality nor a size (its fallback: a catalog row's `credits_per_image` after its
 * table). A meter without either costs nothing.
 */
function termFor(price: Price, meter: PriceTerm['meter'], matches: (term: PriceTerm) => boolean): PriceTerm | undefined {
  const terms = price.terms.filter((term) => term.meter === meter);
  const last = terms[terms.length - 1];
  return terms.find(matches) ?? (last && last.quality === undefined && last.max_pixels === undefined ? last : undefined);
}

/** Megapixels billed for one image: its pixels over the term's megapixel, rounded up, less those included. */
export function billedMegapixels(image: Pixels, term: PriceTerm): number {
  const megapixels = Math.ceil((image.width * image.height) / (term.megapixel ?? DECIMAL_MEGAPIXEL) - 1e-9);
  return Math.max(0, megapixels - (term.included_megapixels ?? 0));
}

/** One line of a cost: the term, the quantity it priced, and the amount. */
export interface CostLine {
  meter: PriceTerm['meter'];
  quantity: number;
  amount: number;
}

/** The cost of `metered` at `price`, line by line, in the price's currency (before the per-call minimum). */
export function costLines(price: Price, metered: Metered): CostLine[] {
  const quality = qualityOf(metered);
  const lines: CostLine[] = [];
  const add = (term: PriceTerm | undefined, quantity: number, perUnit = 1) => {
    if (term && quantity > 0) lines.push({ meter: term.meter, quantity, amount: (term.rate * quantity) / perUnit });
  };
  for (const image of metered.images) {
    const pixels = image.width * image.height;
    add(
      termFor(price, 'image', (term) => fits(term, quality, pixels)),
      1,
    );
    const perMegapixel = termFor(price, 'output_megapixel', (term) => fits(term, quality));
    if (perMegapixel) add(perMegapixel, billedMegapixels(image, perMegapixel));
  }
  for (const input of metered.inputImages ?? []) {
    const perMegapixel = termFor(price, 'input_megapixel', (term) => fits(term, quality));
    if (perMegapixel) add(perMegapixel, billedMegapixels(input, perMegapixel));
  }
  if (metered.video && metered.video.seconds > 0) {
    const { resolution, audio } = metered.video;
    add(
      termFor(
        price,
        'video_second',
        (term) => (term.resolution === undefined || term.resolution === resolution) && (term.audio === undefined || term.audio === audio),
      ),
      metered.video.seconds,
    );
  }
  add(
    termFor(price, 'input_token', () => true),
    metered.tokens?.input ?? 0,
    1_000_000,
  );
  add(
    termFor(price, 'output_token', () => true),
    metered.tokens?.output ?? 0,
    1_000_000,
  );
  add(
    termFor(price, 'call', () => true),
    metered.calls,
  );
  return lines;
}

/** The cost of `metered` at `price`, in its currency: the sum of its lines, at least the per-call minimum. */
export function costOf(price: Price, metered: Metered): number {
  const total = costLines(price, metered).reduce((sum, line) => sum + line.amount, 0);
  return Math.max(total, (price.minimum_per_call ?? 0) * metered.calls);
}

/** Whole credits for a cost in credits: rounded up (a fraction of a credit is a credit), floating-point dust ignored. */
export function wholeCredits(credits: number): number {
  return Math.max(0, Math.ceil(credits - 1e-9));
}

/** The meters a price uses beyond whole images: what a reservation must bound and a settlement must measure. */
export function usesMeter(price: Price, meter: PriceTerm['meter']): boolean {
  return price.terms.some((term) => term.meter === meter);
}
