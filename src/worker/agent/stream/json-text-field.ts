/**
 * The decoded value of one top-level string field (`"text"` of a chat_send input) read from
 * a JSON object that arrives in pieces, as the model generates a tool call's input.
 *
 * Why not partial-JSON parsing of the input so far: that re-parses the whole input on every
 * delta (quadratic in the reply's length) and, on the usual unfinished input, first fails a
 * strict parse whose error object captures a stack trace. This reads each character once.
 *
 * Only what is certain is returned: a piece ending inside an escape (`\`, `\u00`) or on the
 * first half of a surrogate pair waits for the next piece. Anything that is not the field's
 * string value (other keys, nested objects, arrays, numbers) is skipped. The first occurrence
 * of the field is read; the complete input (the tool call) stays the authority.
 */
export class JsonTextField {
  /** Nesting depth: 1 = inside the top-level object. */
  private depth = 0;
  private inString = false;
  /** The string being read is a key at depth 1. */
  private readingKey = false;
  /** At depth 1, the next string is a key (after `{` or `,`), not a value (after `:`). */
  private expectKey = false;
  private key = '';
  /** The next value at depth 1 belongs to the field. */
  private valueIsField = false;
  /** Reading the field's string value now. */
  private capturing = false;
  private done = false;
  /** An escape still being read: `\` alone, or `\u` with fewer than 4 hex digits. */
  private escape = '';
  /** A high surrogate held until its pair arrives. */
  private highSurrogate = '';

  constructor(private readonly field: string) {}

  /** The field's text that this piece adds ('' when none). */
  push(piece: string): string {
    if (this.done) return '';
    let out = '';
    for (let i = 0; i < piece.length; i++) {
      const ch = piece[i]!;
      if (this.inString) {
        if (this.escape !== '') {
          const decoded = this.continueEscape(ch);
          if (decoded !== undefined && this.capturing) out += decoded;
          else if (decoded !== undefined && this.readingKey) this.key += decoded;
          continue;
        }
        if (ch === '\\') {
          this.escape = '\\';
          continue;
        }
        if (ch === '"') {
          this.inString = false;
          if (this.capturing) {
            this.capturing = false;
            this.done = true;
            return this.emit(out, true);
          }
          if (this.readingKey) {
            this.readingKey = false;
            this.valueIsField = this.key === this.field;
          }
          continue;
        }
        // A run of plain characters at once: most of a reply is plain text.
        let end = i + 1;
        while (end < piece.length && piece[end] !== '"' && piece[end] !== '\\') end++;
        const run = piece.slice(i, end);
        if (this.capturing) out += run;
        else if (this.readingKey) this.key += run;
        i = end - 1;
        continue;
      }
      this.structural(ch);
    }
    return this.emit(out, false);
  }

  private structural(ch: string): void {
    switch (ch) {
      case '"':
        this.inString = true;
        if (this.depth === 1 && this.expectKey) {
          this.readingKey = true;
          this.expectKey = false;
          this.key = '';
        } else if (this.depth === 1 && this.valueIsField) {
          this.capturing = true;
          this.valueIsField = false;
        }
        return;
      case '{':
      case '[':
        if (this.depth === 1) this.valueIsField = false;
        this.depth++;
        if (this.depth === 1 && ch === '{') this.expectKey = true;
        return;
      case '}':
      case ']':
        this.depth--;
        return;
      case ',':
        if (this.depth === 1) {
          this.expectKey = true;
          this.valueIsField = false;
        }
        return;
      default:
        // ':' and whitespace keep the state; a number, true, false or null value ends the field's chance.
        if (this.depth === 1 && ch !== ':' && ch !== ' ' && ch !== '\n' && ch !== '\r' && ch !== '\t') {
          this.valueIsField = false;
        }
    }
  }

  /** One more character of an escape: its decoded text once complete. */
  private continueEscape(ch: string): string | undefined {
    if (this.escape === '\\') {
      if (ch === 'u') {
        this.escape = '\\u';
        return undefined;
      }
      this.escape = '';
      return SIMPLE_ESCAPES[ch] ?? ch;
    }
    this.escape += ch;
    if (this.escape.length < 6) return undefined;
    const code = Number.parseInt(this.escape.slice(2), 16);
    this.escape = '';
    return Number.isNaN(code) ? '' : String.fromCharCode(code);
  }

  /** Text ready to show: a trailing high surrogate waits for its pair unless the value ended. */
  private emit(text: string, final: boolean): string {
    let out = this.highSurrogate + text;
    this.highSurrogate = '';
    if (!final && out.length > 0) {
      const last = out.charCodeAt(out.length - 1);
      if (last >= 0xd800 && last <= 0xdbff) {
        this.highSurrogate = out.slice(-1);
        out = out.slice(0, -1);
      }
    }
    return out;
  }
}

const SIMPLE_ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};
