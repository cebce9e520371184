import { APICallError, RetryError } from 'ai';

const PATTERNS = [
  /maximum context length/i,
  /context[_ ]length[_ ]exceeded/i,
  /prompt is too long/i,
  /exceeds the context window/i,
  /too many tokens/i,
  /input is too long/i,
];

function codeOf(data: unknown): string | undefined {
  if (data && typeof data === 'object' && 'error' in data) {
    const error = (data as { error: unknown }).error;
    if (error && typeof error === 'object' && 'code' in error)
      return String((error as { code: unknown }).code);
  }
  return undefined;
}

/** Did the provider refuse the request because the prompt is too long for the model? */
export function isContextOverflowError(err: unknown): boolean {
  if (RetryError.isInstance(err)) return isContextOverflowError(err.lastError);
  if (!APICallError.isInstance(err)) return false;
  if (codeOf(err.data) === 'context_length_exceeded') return true;
  if (err.statusCode !== 400 && err.statusCode !== 413) return false;
  const text = `${err.message}\n${err.responseBody ?? ''}`;
  return PATTERNS.some((p) => p.test(text));
}
