import { hostProblem, type ResolveAll, resolvedHostProblem } from './address-policy.js';

/**
 * Which file parts a user message may carry (checked at ingest, the one path every entry
 * point takes). A file part is fetched later by the worker for the model, so an accepted
 * URL is a promise that it can be fetched safely: `https:` only (never `http:`, `file:`,
 * `ftp:` ...), or inline `data:` up to a size cap, with a media type the operator allows.
 * The host must be public by the one address policy (`address-policy.ts`): an IP literal or a
 * `localhost` name is refused without DNS (`fileProblem`), a name by what it resolves to
 * (`messageFileHostProblem`), and the worker judges the addresses it connects to again when it
 * fetches (safe-download.ts).
 */
export interface FilePolicy {
  /** FILE_MEDIA_TYPES: exact types (`application/pdf`) or a family (`image/*`), lowercase. */
  mediaTypes: readonly string[];
  /** FILE_DATA_URL_MAX_BYTES: decoded bytes of one `data:` URL. */
  maxDataBytes: number;
}

export const DEFAULT_FILE_MEDIA_TYPES = [
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'application/pdf',
  'text/plain',
] as const;

export const DEFAULT_FILE_POLICY: FilePolicy = {
  mediaTypes: DEFAULT_FILE_MEDIA_TYPES,
  maxDataBytes: 128 * 1024,
};

/** An https URL longer than this is refused (no real file host needs more). */
export const MAX_FILE_URL_CHARS = 8192;

export type FileProblemCode = 'FILE_URL_NOT_ALLOWED' | 'FILE_TYPE_NOT_ALLOWED' | 'FILE_TOO_LARGE';

export interface FileProblem {
  code: FileProblemCode;
  message: string;
}

/** `type/subtype` without parameters, lowercase. */
export function baseMediaType(mediaType: string): string {
  return mediaType.split(';')[0]!.trim().toLowerCase();
}

export function mediaTypeAllowed(mediaType: string, allowed: readonly string[]): boolean {
  const type = baseMediaType(mediaType);
  if (!/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/.test(type)) return false;
  return allowed.some((a) => a === type || (a.endsWith('/*') && type.startsWith(a.slice(0, -1))));
}

/**
 * Base64 (RFC 4648's alphabet) that decodes: padded to a multiple of 4, or unpadded with a
 * length that is not 1 more than one (no 6-bit remainder can be a byte).
 */
function isBase64(payload: string): boolean {
  const m = /^([A-Za-z0-9+/]*)(={0,2})$/.exec(payload);
  if (!m) return false;
  const data = m[1]!.length;
  const pad = m[2]!.length;
  return pad > 0 ? (data + pad) % 4 === 0 : data % 4 !== 1;
}

/**
 * Decoded size of a data: URL's payload, or undefined when it is not a well-formed base64
 * data: URL (`data:<type>;base64,<payload>`). Only base64: the model request carries a file's
 * bytes as base64 (the AI SDK reads the payload as such), so a percent-encoded or broken
 * payload would fail every attempt of the turn instead of being refused here.
 */
function dataUrl(url: string): { mediaType: string; bytes: number } | undefined {
  const comma = url.indexOf(',');
  if (comma < 0) return undefined;
  const header = url.slice(5, comma);
  const payload = url.slice(comma + 1);
  if (!/;base64$/i.test(header) || !isBase64(payload)) return undefined;
  const mediaType = header.slice(0, -7) || 'text/plain';
  const pad = payload.endsWith('==') ? 2 : payload.endsWith('=') ? 1 : 0;
  return { mediaType, bytes: Math.floor((payload.length * 3) / 4) - pad };
}

/** The first reason a file part is refused, or undefined when it may be stored. */
export function fileProblem(
  part: { url?: unknown; mediaType?: unknown },
  policy: FilePolicy,
): FileProblem | undefined {
  const mediaType = typeof part.mediaType === 'string' ? part.mediaType : '';
  if (!mediaTypeAllowed(mediaType, policy.mediaTypes)) {
    return {
      code: 'FILE_TYPE_NOT_ALLOWED',
      message: `mediaType '${mediaType.slice(0, 100)}' is not allowed (allowed: ${policy.mediaTypes.join(', ')})`,
    };
  }
  const raw = typeof part.url === 'string' ? part.url : '';
  if (/^data:/i.test(raw)) {
    const data = dataUrl(raw);
    if (!data) {
      return {
        code: 'FILE_URL_NOT_ALLOWED',
        message: 'url: not a well-formed base64 data: URL (data:<media type>;base64,<base64>)',
      };
    }
    if (!mediaTypeAllowed(data.mediaType, policy.mediaTypes)) {
      return {
        code: 'FILE_TYPE_NOT_ALLOWED',
        message: `the data: URL's media type '${data.mediaType.slice(0, 100)}' is not allowed`,
      };
    }
    if (data.bytes > policy.maxDataBytes) {
      return {
        code: 'FILE_TOO_LARGE',
        message: `data: URL holds ${data.bytes} bytes; at most ${policy.maxDataBytes} (FILE_DATA_URL_MAX_BYTES)`,
      };
    }
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { code: 'FILE_URL_NOT_ALLOWED', message: 'url: not a URL' };
  }
  if (url.protocol !== 'https:') {
    return { code: 'FILE_URL_NOT_ALLOWED', message: `url: must be https: or data:, not ${url.protocol}` };
  }
  if (raw.length > MAX_FILE_URL_CHARS) {
    return { code: 'FILE_URL_NOT_ALLOWED', message: `url: longer than ${MAX_FILE_URL_CHARS} characters` };
  }
  if (url.username || url.password) {
    return { code: 'FILE_URL_NOT_ALLOWED', message: 'url: must not carry credentials' };
  }
  const host = hostProblem(url.hostname);
  if (host) return { code: 'FILE_URL_NOT_ALLOWED', message: `url: ${host}` };
  return undefined;
}

/** The first refused file part of a message, with its index for the error message. */
export function messageFileProblem(
  parts: ReadonlyArray<{ type: string }>,
  policy: FilePolicy,
): FileProblem | undefined {
  for (const [i, part] of parts.entries()) {
    if (part.type !== 'file') continue;
    const problem = fileProblem(part as { url?: unknown; mediaType?: unknown }, policy);
    if (problem) return { code: problem.code, message: `message part ${i}: ${problem.message}` };
  }
  return undefined;
}

/**
 * The first file part whose https host name resolves to an address that is not public. Runs
 * after `messageFileProblem` (every https URL parses); each distinct host is resolved once.
 */
export async function messageFileHostProblem(
  parts: ReadonlyArray<{ type: string }>,
  resolve?: ResolveAll,
): Promise<FileProblem | undefined> {
  const hosts = new Map<string, Promise<string | undefined>>();
  const checks = parts.flatMap((part, i) => {
    const url = part.type === 'file' ? (part as { url?: unknown }).url : undefined;
    if (typeof url !== 'string' || !/^https:/i.test(url)) return [];
    const host = new URL(url).hostname;
    let check = hosts.get(host);
    if (!check) {
      check = resolvedHostProblem(host, resolve);
      hosts.set(host, check);
    }
    return [check.then((problem) => problem && `message part ${i}: url: ${problem}`)];
  });
  const message = (await Promise.all(checks)).find((p) => p !== undefined);
  return message === undefined ? undefined : { code: 'FILE_URL_NOT_ALLOWED', message };
}
