/**
 * FLUX.1 Kontext [pro] takes `aspect_ratio` ("between 21:9 and 9:21") and makes about 1 MP whatever the
 * ratio. The gateway names each of the nine usual ratios by a nominal size of about 1 MP, the same on
 * every upstream that serves the model (BFL, fal), so a catalog can move between them; the stored
 * image's size is what the upstream reports.
 */
export const KONTEXT_RATIOS: Readonly<Record<string, string>> = {
  '1568x672': '21:9',
  '1280x720': '16:9',
  '1152x864': '4:3',
  '1248x832': '3:2',
  '1024x1024': '1:1',
  '832x1248': '2:3',
  '864x1152': '3:4',
  '720x1280': '9:16',
  '672x1568': '9:21',
};
