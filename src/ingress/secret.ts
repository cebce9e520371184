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
