/**
 * Reversible escaping of platform ids into chatlane's chatKey alphabet ([A-Za-z0-9._:@-]).
 *
 * Every byte of the id's UTF-8 outside [A-Za-z0-9.:@-] becomes `_` + two lower-case hex
 * digits; `_` itself is escaped (`_5f`), so `_` always starts an escape and decoding is
 * unambiguous. Ids that are already plain (Telegram's numeric ids, Slack's `C0123ABC`) pass
 * through unchanged, so the common chatKeys stay readable.
 */
const PLAIN = /[A-Za-z0-9.:@-]/;

export function escapeChatKeyPart(id: string): string {
  let out = '';
  for (const ch of id) {
    if (PLAIN.test(ch)) {
      out += ch;
      continue;
    }
    for (const byte of Buffer.from(ch, 'utf8')) out += `_${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/** The id `escapeChatKeyPart` was given, or undefined when `part` is not its output. */
export function unescapeChatKeyPart(part: string): string | undefined {
  if (!/^(?:[A-Za-z0-9.:@-]|_[0-9a-f]{2})*$/.test(part)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < part.length; ) {
    if (part[i] === '_') {
      bytes.push(Number.parseInt(part.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(part.charCodeAt(i));
      i += 1;
    }
  }
  const decoded = Buffer.from(bytes).toString('utf8');
  // Bytes that are not valid UTF-8 were not produced by escapeChatKeyPart.
  return escapeChatKeyPart(decoded) === part ? decoded : undefined;
}
