import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, unknown>> };

/** Reads a spec from openapi/ (source tree and compiled build both find it). */
export function loadOpenApiDocument(name: 'gateway' | 'creative'): OpenApiDocument {
  const candidates = [path.resolve(__dirname, '../../openapi'), path.resolve(__dirname, '../../../openapi')];
  const dir = candidates.find((d) => fs.existsSync(path.join(d, `${name}.yaml`)));
  if (!dir) throw new Error(`openapi/${name}.yaml not found`);
  return YAML.parse(fs.readFileSync(path.join(dir, `${name}.yaml`), 'utf8')) as OpenApiDocument;
}
