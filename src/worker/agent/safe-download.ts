import type { IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { isIP } from 'node:net';
import { addressProblem, guardLookup, hostProblem, type ResolveAll } from '../../shared/address-policy.js';
import { FileRefusedError } from '../../shared/errors.js';
import type { DownloadFunction } from './loop.js';

/**
 * The AI SDK's file download, made safe (docs/http-api.md "File parts"). A file part's URL comes from
 * whoever sent the message, so fetching it is a server-side request forgery vector: the SDK's
 * own check refuses IP literals only, not a host name that resolves to 127.0.0.1, 10.x or
 * the cloud metadata address. Here every URL (and every redirect) is:
 * - `https:` only, IP literals and `localhost` names judged directly;
 * - connected through a `lookup` that refuses every address that is not public by the one
 *   address policy (`shared/address-policy.ts`: private, loopback, link-local, metadata, NAT64
 *   and 6to4 forms of them, …) AFTER DNS resolution, on the very addresses the socket uses
 *   (no rebinding gap);
 * - capped at `maxBytes` (Content-Length and the bytes actually read) and `timeoutMs` overall.
 * chatlane fetches every URL itself, also those the model could fetch on its own: a
 * self-hosted model server inside the private network must not be handed a URL that points
 * into it. A refusal throws FileRefusedError: the message fails (FILE_REFUSED, one notice),
 * the chat moves on.
 */
export interface SafeDownloadOptions {
  maxBytes: number;
  timeoutMs: number;
  /** Host name resolution (tests map names to addresses); default `dns.lookup`. */
  resolve?: ResolveAll;
  /** Which addresses are refused; default every one the address policy refuses. Tests only. */
  blocked?: (address: string) => boolean;
  /** Extra trusted CA certificates (tests with their own TLS server). */
  ca?: string | Buffer;
}

const MAX_REDIRECTS = 3;

export function createSafeDownload(opts: SafeDownloadOptions): DownloadFunction {
  const test = opts.blocked;
  const refuse = test
    ? (address: string) => (test(address) ? (addressProblem(address) ?? `${address} is blocked`) : undefined)
    : addressProblem;
  const lookup = guardLookup(opts.resolve, refuse);
  return (requests) =>
    Promise.all(
      requests.map(async ({ url }) => {
        const deadline = AbortSignal.timeout(opts.timeoutMs);
        let current = url;
        for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
          const res = await get(current, { ...opts, lookup, refuse, signal: deadline });
          if ('redirect' in res) {
            current = res.redirect;
            continue;
          }
          return { data: res.data, mediaType: res.mediaType };
        }
        throw new FileRefusedError(`${url.host}: more than ${MAX_REDIRECTS} redirects`);
      }),
    );
}

type Got = { data: Uint8Array; mediaType: string | undefined } | { redirect: URL };

function get(
  url: URL,
  opts: SafeDownloadOptions & {
    lookup: ReturnType<typeof guardLookup>;
    refuse: (address: string) => string | undefined;
    signal: AbortSignal;
  },
): Promise<Got> {
  if (url.protocol !== 'https:')
    throw new FileRefusedError(`${url.protocol} URLs are not fetched (https: only)`);
  // An IP literal never reaches `lookup`: judge it here.
  const literal = url.hostname.replace(/^\[|\]$/g, '');
  const refused = isIP(literal) ? opts.refuse(literal) : hostProblem(url.hostname);
  if (refused) throw new FileRefusedError(refused);
  return new Promise<Got>((resolve, reject) => {
    const fail = (err: unknown) => reject(refusal(url, err, opts.signal));
    const req = request(
      url,
      {
        lookup: opts.lookup,
        signal: opts.signal,
        ...(opts.ca && { ca: opts.ca }),
        headers: { accept: '*/*' },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400 && res.headers.location) {
          res.resume();
          try {
            resolve({ redirect: new URL(res.headers.location, url) });
          } catch (err) {
            fail(err);
          }
          return;
        }
        if (status !== 200) {
          res.resume();
          return fail(new Error(`answered ${status}`));
        }
        readCapped(res, opts.maxBytes).then(
          (data) =>
            resolve({ data, mediaType: res.headers['content-type']?.split(';')[0]?.trim() || undefined }),
          fail,
        );
      },
    );
    req.on('error', fail);
    req.end();
  });
}

function readCapped(res: IncomingMessage, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    return Promise.reject(new Error(`is ${declared} bytes; at most ${maxBytes} (FILE_FETCH_MAX_BYTES)`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        res.destroy();
        reject(new Error(`is more than ${maxBytes} bytes (FILE_FETCH_MAX_BYTES)`));
        return;
      }
      chunks.push(chunk);
    });
    res.on('end', () => resolve(new Uint8Array(Buffer.concat(chunks))));
    res.on('error', reject);
  });
}

function refusal(url: URL, err: unknown, signal: AbortSignal): FileRefusedError {
  if (err instanceof FileRefusedError) return err;
  const reason = signal.aborted ? 'took too long (FILE_FETCH_TIMEOUT_MS)' : (err as Error)?.message;
  return new FileRefusedError(`file ${url.host}${url.pathname.slice(0, 80)}: ${reason}`, { cause: err });
}
