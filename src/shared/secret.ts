import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * A secret checked in constant time: both sides are hashed first, so the comparison takes
 * the same time whatever length or content was sent.
 */
export function secretMatcher(expected: string): (given: string) => boolean {
  const want = digest(expected);
  return (given) => timingSafeEqual(digest(given), want);
}

/** The token of an `Authorization: Bearer <token>` header; undefined when there is none. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  const token = /^Bearer\s+(.+)$/i.exec(value ?? '')?.[1]?.trim();
  return token ? token : undefined;
}

/** How a request stands against one bearer secret. */
export type BearerCheck = 'ok' | 'missing' | 'wrong';

/** A check of `Authorization: Bearer <expected>` (METRICS_TOKEN on the ingress and the side ports). */
export function bearerCheck(expected: string): (header: string | string[] | undefined) => BearerCheck {
  const matches = secretMatcher(expected);
  return (header) => {
    const token = bearerToken(header);
    if (token === undefined) return 'missing';
    return matches(token) ? 'ok' : 'wrong';
  };
}
