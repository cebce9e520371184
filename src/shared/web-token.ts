import { SignJWT } from 'jose';

/**
 * Per-chat browser tokens: an HS256 JWT signed with WEB_TOKEN_SECRET whose `sub` is the one
 * chatKey it opens, with an `exp`. An app's backend mints them (this function, or any JWT
 * library) so a browser never holds API_TOKEN; the ingress verifies them (ingress/web-token.ts).
 */
export const WEB_TOKEN_ALG = 'HS256';

export function webTokenKey(secret: string): Uint8Array {
  return new TextEncoder().encode(secret);
}

/** A token for `chatKey`, valid for `ttlSeconds`. */
export async function mintWebToken(secret: string, chatKey: string, ttlSeconds = 3600): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: WEB_TOKEN_ALG })
    .setSubject(chatKey)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .sign(webTokenKey(secret));
}
