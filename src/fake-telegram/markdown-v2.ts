/**
 * Telegram's MarkdownV2 (Bot API "Formatting options") read the way the Bot API reads it, so
 * the fake Bot API can refuse what Telegram refuses ("Bad Request: can't parse entities: …")
 * and tests can check chatlane's classic Telegram text. Stricter than Telegram where the
 * rules leave room: entities must close in the order they opened, and the nesting rules are
 * enforced as written (bold, italic, underline, strikethrough and spoiler nest in anything
 * but code and pre; code, pre and links contain no other entity of their kind or code).
 *
 * - Any character of code 1–126 may be escaped with `\`; a `\` before anything else, or last,
 *   is an error.
 * - Inside `code` and ```` ```pre``` ````: only `` ` `` and `\` are special (both escaped).
 * - Inside a link's `(…)`: `)` and `\` must be escaped.
 * - Everywhere else `_ * [ ] ( ) ~ ` > # + - = | { } . !` must be escaped, except as markup:
 *   `*bold*`, `_italic_`, `__underline__`, `~strike~`, `||spoiler||`, `[text](url)`,
 *   `` `code` ``, ```` ```lang\npre``` ````, `>` at the start of a line (a quote).
 */
export type MarkdownV2Result = { ok: true; text: string } | { ok: false; error: string };

const RESERVED = new Set(['(', ')', '#', '+', '-', '=', '{', '}', '.', '!', '|', ']']);
type Entity = 'bold' | 'italic' | 'underline' | 'strikethrough' | 'spoiler' | 'link';
const NAMES: Record<Entity, string> = {
  bold: 'Bold',
  italic: 'Italic',
  underline: 'Underline',
  strikethrough: 'Strikethrough',
  spoiler: 'Spoiler',
  link: 'TextUrl',
};

export function parseMarkdownV2(input: string): MarkdownV2Result {
  const fail = (what: string, at: number): MarkdownV2Result => ({
    ok: false,
    error: `can't parse entities: ${what} at byte offset ${Buffer.byteLength(input.slice(0, at))}`,
  });
  const stack: Entity[] = [];
  let text = '';
  let i = 0;
  const toggle = (entity: Entity, at: number): MarkdownV2Result | undefined => {
    if (stack.at(-1) === entity) stack.pop();
    else if (stack.includes(entity)) return fail(`${NAMES[entity]} entity overlaps another`, at);
    else stack.push(entity);
    return undefined;
  };
  while (i < input.length) {
    const c = input.charAt(i);
    const lineStart = i === 0 || input.charAt(i - 1) === '\n';
    if (c === '\\') {
      const next = input.charAt(i + 1);
      if (!escapable(next)) return fail(BAD_ESCAPE, i);
      text += next;
      i += 2;
      continue;
    }
    if (c === '`') {
      if (stack.length > 0) return fail(`Code entity can't be part of a ${NAMES[stack.at(-1)!]} entity`, i);
      const pre = input.startsWith('```', i);
      let j = i + (pre ? 3 : 1);
      if (pre) {
        const newline = input.indexOf('\n', j);
        if (newline >= 0 && /^[^\s`\\]*$/.test(input.slice(j, newline))) j = newline + 1;
      }
      const read = readUntil(input, j, '`');
      if ('error' in read) return fail(read.error, read.at);
      if (read.end >= input.length) return fail(`Can't find end of ${pre ? 'Pre' : 'Code'} entity`, i);
      if (pre && !input.startsWith('```', read.end)) {
        return fail("Character '`' is reserved and must be escaped", read.end);
      }
      text += read.value;
      i = read.end + (pre ? 3 : 1);
      continue;
    }
    if (c === '*' || c === '~') {
      const bad = toggle(c === '*' ? 'bold' : 'strikethrough', i);
      if (bad) return bad;
      i += 1;
      continue;
    }
    if (c === '_') {
      const under = input.charAt(i + 1) === '_';
      const bad = toggle(under ? 'underline' : 'italic', i);
      if (bad) return bad;
      i += under ? 2 : 1;
      continue;
    }
    if (c === '|' && input.charAt(i + 1) === '|') {
      const bad = toggle('spoiler', i);
      if (bad) return bad;
      i += 2;
      continue;
    }
    if (c === '[') {
      if (stack.includes('link')) return fail("TextUrl entity can't contain another", i);
      stack.push('link');
      i += 1;
      continue;
    }
    if (c === ']' && stack.at(-1) === 'link' && input.charAt(i + 1) === '(') {
      const read = readUntil(input, i + 2, ')');
      if ('error' in read) return fail(read.error, read.at);
      if (read.end >= input.length) return fail("Can't find end of a URL", i);
      if (!URL.canParse(read.value)) return fail(`Wrong URL ${JSON.stringify(read.value)}`, i);
      stack.pop();
      i = read.end + 1;
      continue;
    }
    if (c === '>' && lineStart) {
      i += 1;
      continue;
    }
    if (c === '>' || RESERVED.has(c)) {
      return fail(`Character '${c}' is reserved and must be escaped with the preceding '\\'`, i);
    }
    text += c;
    i += 1;
  }
  const open = stack.at(-1);
  if (open) return fail(`Can't find end of ${NAMES[open]} entity`, input.length);
  return { ok: true, text };
}

const BAD_ESCAPE = "Character '\\' is reserved and must be escaped";

function escapable(c: string): boolean {
  const code = c.charCodeAt(0);
  return c.length > 0 && code >= 1 && code <= 126;
}

/**
 * From `from` to the first unescaped `stop` (its index as `end`, the input's length when there
 * is none), escapes resolved: the body of code, pre and a link's URL.
 */
function readUntil(
  input: string,
  from: number,
  stop: string,
): { value: string; end: number } | { error: string; at: number } {
  let value = '';
  let j = from;
  while (j < input.length) {
    const d = input.charAt(j);
    if (d === stop) return { value, end: j };
    if (d === '\\') {
      const next = input.charAt(j + 1);
      if (!escapable(next)) return { error: BAD_ESCAPE, at: j };
      value += next;
      j += 2;
      continue;
    }
    value += d;
    j += 1;
  }
  return { value, end: input.length };
}
