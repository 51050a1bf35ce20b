/**
 * Makes `controller` abort, with the same reason, when `source` aborts, until the returned function
 * unlinks them. For a controller of the caller's own, `controller.signal` then behaves as
 * `AbortSignal.any([source, controller.signal])` would, at a fraction of its cost: `any()` allocates
 * a signal with weak references to follow every source (and flattens derived sources), which was
 * several µs and a share of the garbage of every request. The caller must unlink once its work is
 * done, so `source` (the request's) does not keep the listener.
 */
export function abortWhen(source: AbortSignal, controller: AbortController): () => void {
  if (source.aborted) {
    controller.abort(source.reason);
    return noop;
  }
  const forward = () => controller.abort(source.reason);
  source.addEventListener('abort', forward, { once: true });
  return () => source.removeEventListener('abort', forward);
}

const noop = (): void => undefined;
