import type { InputImageFormat, InputImageLimits } from '../providers/upstream-models';

const FORMATS: readonly InputImageFormat[] = ['png', 'jpeg', 'webp', 'bmp', 'tiff', 'gif'];
const FIELDS = [
  'max_images',
  'formats',
  'max_bytes',
  'min_ratio',
  'max_ratio',
  'max_side',
  'min_side',
  'max_pixels',
  'max_inputs_plus_outputs',
  'mask',
  'delivery',
];

/**
 * A MODEL_CATALOG entry's `input_limits`, checked; throws a readable message when it is wrong.
 * `mask` defaults to false and `delivery` to `inline` (data URIs in the request body).
 */
export function inputLimits(value: unknown, where: string): InputImageLimits {
  const field = `${where}: "input_limits`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${field}" must be an object (or null for none)`);
  const v = value as Record<string, unknown>;
  const unknown = Object.keys(v).filter((name) => !FIELDS.includes(name));
  if (unknown.length > 0) throw new Error(`${field}" has unknown field(s) ${unknown.join(', ')} (known: ${FIELDS.join(', ')})`);
  const integer = (name: string): number | undefined => {
    const n = v[name];
    if (n === undefined) return undefined;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw new Error(`${field}.${name}" must be an integer >= 1`);
    return n;
  };
  const ratio = (name: string): number | undefined => {
    const n = v[name];
    if (n === undefined) return undefined;
    if (typeof n !== 'number' || !(n > 0) || !Number.isFinite(n)) throw new Error(`${field}.${name}" must be a number > 0`);
    return n;
  };
  const maxImages = integer('max_images');
  const maxBytes = integer('max_bytes');
  if (maxImages === undefined || maxBytes === undefined) throw new Error(`${field}" needs max_images and max_bytes`);
  const formats = v.formats;
  if (!Array.isArray(formats) || formats.length === 0 || !formats.every((f): f is InputImageFormat => FORMATS.includes(f as InputImageFormat))) {
    throw new Error(`${field}.formats" must be a non-empty array of ${FORMATS.join(', ')}`);
  }
  if (v.mask !== undefined && typeof v.mask !== 'boolean') throw new Error(`${field}.mask" must be true or false`);
  if (v.delivery !== undefined && v.delivery !== 'inline' && v.delivery !== 'url') throw new Error(`${field}.delivery" must be "inline" or "url"`);
  const limits: InputImageLimits = {
    max_images: maxImages,
    formats: [...new Set(formats)],
    max_bytes: maxBytes,
    mask: v.mask === true,
    delivery: v.delivery === 'url' ? 'url' : 'inline',
  };
  const optional = {
    min_ratio: ratio('min_ratio'),
    max_ratio: ratio('max_ratio'),
    max_side: integer('max_side'),
    min_side: integer('min_side'),
    max_pixels: integer('max_pixels'),
    max_inputs_plus_outputs: integer('max_inputs_plus_outputs'),
  };
  for (const [name, n] of Object.entries(optional)) if (n !== undefined) Object.assign(limits, { [name]: n });
  if (limits.min_ratio !== undefined && limits.max_ratio !== undefined && limits.min_ratio > limits.max_ratio)
    throw new Error(`${field}" has min_ratio above max_ratio`);
  if (limits.min_side !== undefined && limits.max_side !== undefined && limits.min_side > limits.max_side)
    throw new Error(`${field}" has min_side above max_side`);
  if (limits.max_inputs_plus_outputs !== undefined && limits.max_inputs_plus_outputs < 2)
    throw new Error(`${field}.max_inputs_plus_outputs" must leave room for an output (>= 2)`);
  return limits;
}
