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

/** Claims an ingress may require (WEB_TOKEN_AUDIENCE, WEB_TOKEN_ISSUER). */
export interface WebTokenClaims {
  audience?: string | undefined;
  issuer?: string | undefined;
}

/**
 * A token for `chatKey`, valid for `ttlSeconds` (the ingress refuses one longer-lived than
 * WEB_TOKEN_MAX_TTL_S, a day by default), with `aud` and `iss` when given.
 */
export async function mintWebToken(
  secret: string,
  chatKey: string,
  ttlSeconds = 3600,
  claims: WebTokenClaims = {},
): Promise<string> {
  const jwt = new SignJWT({})
    .setProtectedHeader({ alg: WEB_TOKEN_ALG })
    .setSubject(chatKey)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds);
  if (claims.audience !== undefined) jwt.setAudience(claims.audience);
  if (claims.issuer !== undefined) jwt.setIssuer(claims.issuer);
  return jwt.sign(webTokenKey(secret));
}
