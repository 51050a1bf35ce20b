import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ReceivedImage, fetchInputImage } from './input-images';
import { expectedVolcSignature } from './volc-signature';
import { AccountCounters, delay, imageFileUrl, readBody, sendJson, serveImageFile, token, answering } from './scenario';
import { solidPngB64 } from './solid-images';

/**
 * A local stand-in for visual.volcengineapi.com (CVSync2AsyncSubmitTask / GetResult), with
 * signature verification and the real answer shapes. Behaviour per prompt token:
 * [code:N] submit fails with code N; [post-code:N] the result fails with N ([post-code-times:K]: for the
 * prompt's first K tasks only); [busy:K] the first K
 * submits of that prompt answer 50429; [pending:K] K polls say "generating"; [lost] the task is
 * not_found; [garbage] a non-JSON body; [slow:MS] answers late; [fail-from:K] the K-th and later
 * submits of that prompt fail with 50500 (the earlier ones make their images); [extra-images:K] a task
 * answers K images more than its one (as 4.0 may without force_single, and bills each). Each image is a
 * real PNG of the task's `width` x `height` (1024 x 1024 when it sent none).
 */
export interface FakeVisual {
  url: string;
  requests: Array<{ action: string; body: Record<string, unknown> }>;
  /** The `image_urls` of each task and what fetching each one gave (undefined: it served no 200), recorded once fetched. */
  inputs: Array<{ taskId: string; prompt: string; urls: string[]; images: Array<ReceivedImage | undefined> }>;
  /** Tasks in flight at this account (submitted, not yet finished or failed) and submits per minute. */
  counters: AccountCounters;
  /** A task this account accepted earlier (from a process that is gone), polled like a submitted one; its id. */
  acceptTask(prompt: string, size?: { width: number; height: number }): string;
  close(): Promise<void>;
}

const BUSY_CODES = new Set([50429, 50430]);

/**
 * What each req_key documents (kept apart from the gateway's table on purpose, so a drift shows):
 * width × height and width / height bounds, and the optional fields it reads. Anything else is refused.
 */
const REQ_KEYS: Record<string, { minPixels: number; maxPixels: number; minRatio: number; maxRatio: number; fields: string[] }> = {
  jimeng_t2i_v40: {
    minPixels: 1024 * 1024,
    maxPixels: 4096 * 4096,
    minRatio: 1 / 3,
    maxRatio: 3,
    fields: ['image_urls', 'size', 'width', 'height', 'scale', 'force_single', 'min_ratio', 'max_ratio'],
  },
  jimeng_t2i_v31: { minPixels: 512 * 512, maxPixels: 2048 * 2048, minRatio: 1 / 3, maxRatio: 3, fields: ['seed', 'width', 'height', 'use_pre_llm'] },
};
/**
 * Jimeng 4.0's input images ("即梦4.0" doc, 限制条件): 0…10 URLs it fetches; JPEG or PNG; ≤ 15 MB;
 * at most 4096×4096; width / height in 1/3…3. Kept apart from the gateway's table on purpose.
 */
const V40_INPUTS = { maxImages: 10, formats: ['jpeg', 'png'], maxBytes: 15 * 1000 * 1000, maxSide: 4096, minRatio: 1 / 3, maxRatio: 3 };

/** Why the task fails on these fetched inputs, or undefined when it can use them. */
function inputFailure(images: Array<ReceivedImage | undefined>): string | undefined {
  for (const [i, image] of images.entries()) {
    if (!image) return `image_urls[${i}]: download failed`;
    if (!image.format || !V40_INPUTS.formats.includes(image.format)) return `image_urls[${i}]: not a JPEG or PNG image`;
    if (image.bytes.length > V40_INPUTS.maxBytes) return `image_urls[${i}]: larger than 15 MB`;
    if (image.width !== undefined && image.height !== undefined) {
      const ratio = image.width / image.height;
      if (image.width > V40_INPUTS.maxSide || image.height > V40_INPUTS.maxSide) return `image_urls[${i}]: larger than 4096x4096`;
      if (ratio < V40_INPUTS.minRatio || ratio > V40_INPUTS.maxRatio) return `image_urls[${i}]: aspect ratio out of [1/3, 3]`;
    }
  }
  return undefined;
}

/** The fake's code for a parameter the upstream refuses (the real API's exact code for it is not documented). */
const INVALID_PARAMETER = 50400;
const MESSAGES: Record<number, string> = {
  50411: 'Pre Img Risk Not Pass',
  50412: 'Text Risk Not Pass',
  50413: 'Post Text Risk Not Pass',
  50429: 'Request Has Reached API Limit, Please Try Later',
  50430: 'Request Has Reached API Concurrent Limit, Please Try Later',
  50400: 'Invalid Parameter',
  50500: 'Internal Error',
  50501: 'Internal RPC Error',
  50511: 'Post Img Risk Not Pass',
  50512: 'Post Img Risk Not Pass',
  50519: 'Post Img Risk Not Pass',
};

export interface FakeVisualOptions {
  /**
   * The host its result URLs name, as the real API's `p<N>-aiop-sign.byteimg.com` (https): the
   * test maps it back to this fake. Unset: URLs on the fake's own host (other processes can fetch them).
   */
  imageHost?: string;
}

export async function startFakeVisual(
  credentials: { accessKeyId: string; secretAccessKey: string },
  port = 0,
  options: FakeVisualOptions = {},
): Promise<FakeVisual> {
  const requests: FakeVisual['requests'] = [];
  const inputs: FakeVisual['inputs'] = [];
  /** Each task's input fetch (started at submit, as the gateway's URLs are valid from then on): why it fails, if it does. */
  const tasks = new Map<
    string,
    { prompt: string; polls: number; width: number; height: number; finished: () => void; inputsFailure?: Promise<string | undefined> }
  >();
  const counters = new AccountCounters();
  const busyCounts = new Map<string, number>();
  const submitCounts = new Map<string, number>();
  const postFailures = new Map<string, number>();
  let nextTask = 1;

  const metadataError = (res: http.ServerResponse, action: string, code: string, message: string) =>
    sendJson(res, 401, {
      ResponseMetadata: {
        RequestId: `fake-${Date.now()}`,
        Action: action,
        Version: '2022-08-31',
        Service: 'cv',
        Region: 'cn-north-1',
        Error: { CodeN: 100010, Code: code, Message: message },
      },
    });
  const failure = (res: http.ServerResponse, code: number) =>
    sendJson(res, BUSY_CODES.has(code) ? 429 : code >= 50500 && code < 50510 ? 500 : 200, {
      code,
      data: null,
      message: MESSAGES[code] ?? 'Error',
      request_id: `fake-${Date.now()}`,
      status: code,
      time_elapsed: '1ms',
    });

  const resultUrl = (req: http.IncomingMessage, prompt: string, name: string, size: { width: number; height: number }) => {
    const url = imageFileUrl(req, prompt, name, size);
    // Like the real API's signed URLs (…~tplv-…-image.image?rk3s=…&x-expires=…), on the named host.
    return options.imageHost ? url.replace(/^http:\/\/[^/]+/, `https://${options.imageHost}`) + '?rk3s=fake&x-expires=9999999999' : url;
  };

  const server = http.createServer(
    answering(async (req, res) => {
      const raw = await readBody(req);
      if (serveImageFile(req, res)) return;
      const target = new URL(req.url ?? '/', 'http://fake');
      const action = target.searchParams.get('Action') ?? '';
      const auth = /^HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
        req.headers.authorization ?? '',
      );
      if (!auth) return metadataError(res, action, 'MissingAuthenticationToken', 'missing or malformed Authorization');
      const [, accessKeyId, , region, service, signedHeaders, signature] = auth;
      if (accessKeyId !== credentials.accessKeyId) return metadataError(res, action, 'InvalidAccessKey', 'unknown access key');
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) headers[name] = String(value);
      if (headers['x-content-sha256'] === undefined || !signedHeaders!.split(';').includes('x-date')) {
        return metadataError(res, action, 'SignatureDoesNotMatch', 'X-Date and X-Content-Sha256 must be signed');
      }
      const expected = expectedVolcSignature({
        secretAccessKey: credentials.secretAccessKey,
        method: req.method ?? 'POST',
        path: target.pathname,
        query: target.search.slice(1),
        headers,
        signedHeaders: signedHeaders!.split(';'),
        body: raw,
        xDate: headers['x-date'] ?? '',
        region: region!,
        service: service!,
      });
      if (expected !== signature) return metadataError(res, action, 'SignatureDoesNotMatch', 'The request signature we calculated does not match');

      const body = JSON.parse(raw) as Record<string, unknown>;
      requests.push({ action, body });
      if (action === 'CVSync2AsyncSubmitTask') {
        const prompt = String(body.prompt ?? '');
        const slow = token(prompt, 'slow');
        if (slow) await delay(Number(slow));
        if (token(prompt, 'garbage') !== undefined) {
          res.writeHead(200, { 'Content-Type': 'text/html' });
          return res.end('<html>upstream exploded</html>');
        }
        const code = token(prompt, 'code');
        if (code) return failure(res, Number(code));
        const spec = REQ_KEYS[String(body.req_key)];
        // Stricter than the real API (which ignores what it does not read): a field the req_key
        // does not document is refused, so a test sees the gateway send it.
        const undocumented = spec && Object.keys(body).filter((field) => field !== 'req_key' && field !== 'prompt' && !spec.fields.includes(field));
        if (undocumented && undocumented.length > 0) {
          return sendJson(res, 400, {
            code: INVALID_PARAMETER,
            data: null,
            message: `undocumented field(s) for ${String(body.req_key)}: ${undocumented.join(', ')}`,
            status: INVALID_PARAMETER,
          });
        }
        if (spec) {
          const width = Number(body.width);
          const height = Number(body.height);
          const pixels = width * height;
          // 4.0: min_ratio / max_ratio widen the ratio, each in [1/16, 16) (defaults 1/3 and 3).
          const minRatio = body.min_ratio === undefined ? spec.minRatio : Number(body.min_ratio);
          const maxRatio = body.max_ratio === undefined ? spec.maxRatio : Number(body.max_ratio);
          if ([minRatio, maxRatio].some((r) => !(r >= 1 / 16 && r < 16))) return failure(res, INVALID_PARAMETER);
          if (pixels < spec.minPixels || pixels > spec.maxPixels || width / height < minRatio || width / height > maxRatio) {
            return failure(res, INVALID_PARAMETER);
          }
        }
        const failFrom = Number(token(prompt, 'fail-from') ?? 0);
        const submitted = (submitCounts.get(prompt) ?? 0) + 1;
        submitCounts.set(prompt, submitted);
        if (failFrom > 0 && submitted >= failFrom) return failure(res, 50500);
        const busy = Number(token(prompt, 'busy') ?? 0);
        const seen = busyCounts.get(prompt) ?? 0;
        if (seen < busy) {
          busyCounts.set(prompt, seen + 1);
          return failure(res, 50429);
        }
        const urls = body.image_urls;
        if (
          urls !== undefined &&
          (!Array.isArray(urls) || urls.length > V40_INPUTS.maxImages || !urls.every((u) => typeof u === 'string' && /^https?:\/\//.test(u)))
        ) {
          return sendJson(res, 400, { code: INVALID_PARAMETER, data: null, message: 'image_urls must be 0 to 10 http(s) URLs', status: INVALID_PARAMETER });
        }
        const taskId = `task-${nextTask++}`;
        // The API fetches the inputs itself while the task runs; a URL that serves no usable image fails the task.
        const inputsFailure =
          Array.isArray(urls) && urls.length > 0
            ? Promise.all((urls as string[]).map(fetchInputImage)).then((images) => {
                inputs.push({ taskId, prompt, urls: urls as string[], images });
                return inputFailure(images);
              })
            : undefined;
        tasks.set(taskId, {
          prompt,
          polls: 0,
          width: Number(body.width),
          height: Number(body.height),
          finished: counters.start(),
          ...(inputsFailure ? { inputsFailure } : {}),
        });
        return sendJson(res, 200, {
          code: 10000,
          data: { task_id: taskId },
          message: 'Success',
          request_id: `fake-${taskId}`,
          status: 10000,
          time_elapsed: '5ms',
        });
      }
      if (action === 'CVSync2AsyncGetResult') {
        const task = tasks.get(String(body.task_id));
        if (!task || token(task.prompt, 'lost') !== undefined) {
          return sendJson(res, 200, {
            code: 10000,
            data: { status: 'not_found', image_urls: null, binary_data_base64: null },
            message: 'Success',
            status: 10000,
          });
        }
        const inputsFailed = task.inputsFailure && (await task.inputsFailure);
        if (inputsFailed) {
          task.finished();
          return sendJson(res, 200, {
            code: INVALID_PARAMETER,
            data: null,
            message: `Invalid Parameter: ${inputsFailed}`,
            request_id: 'fake',
            status: INVALID_PARAMETER,
            time_elapsed: '1ms',
          });
        }
        const postCode = token(task.prompt, 'post-code');
        // [post-code-times:K]: only the prompt's first K tasks fail with post-code.
        const times = token(task.prompt, 'post-code-times');
        const failed = postFailures.get(task.prompt) ?? 0;
        if (postCode && (times === undefined || failed < Number(times))) {
          postFailures.set(task.prompt, failed + 1);
          task.finished();
          // The real API answers these with HTTP 400.
          return failure(res, Number(postCode));
        }
        task.polls += 1;
        const pending = Number(token(task.prompt, 'pending') ?? 1);
        if (task.polls <= pending) {
          return sendJson(res, 200, {
            code: 10000,
            data: { status: task.polls === 1 ? 'in_queue' : 'generating', image_urls: null, binary_data_base64: null },
            message: 'Success',
            status: 10000,
          });
        }
        task.finished();
        const returnUrl = (JSON.parse(String(body.req_json ?? '{}')) as { return_url?: boolean }).return_url === true;
        const made = Number.isInteger(task.width) && Number.isInteger(task.height) ? { width: task.width, height: task.height } : { width: 1024, height: 1024 };
        const names = Array.from({ length: 1 + Number(token(task.prompt, 'extra-images') ?? 0) }, (_, i) =>
          i === 0 ? String(body.task_id) : `${String(body.task_id)}-${i}`,
        );
        return sendJson(res, 200, {
          code: 10000,
          data: {
            status: 'done',
            image_urls: returnUrl ? names.map((name) => resultUrl(req, task.prompt, name, made)) : null,
            binary_data_base64: returnUrl ? [] : names.map(() => solidPngB64(made.width, made.height)),
          },
          message: 'Success',
          request_id: 'fake',
          status: 10000,
          time_elapsed: '800ms',
        });
      }
      return sendJson(res, 404, { ResponseMetadata: { Error: { Code: 'InvalidActionOrVersion', Message: `unknown action ${action}` } } });
    }),
  );
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    inputs,
    counters,
    acceptTask(prompt, size = { width: 1024, height: 1024 }) {
      const taskId = `task-${nextTask++}`;
      tasks.set(taskId, { prompt, polls: 0, ...size, finished: counters.start() });
      return taskId;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
