import { ApiError } from '../../src/errors/api-error';

/** The ApiError `fn` throws; fails the test when it throws something else or nothing. */
export function thrownApiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }
  throw new Error('expected an ApiError, nothing was thrown');
}
