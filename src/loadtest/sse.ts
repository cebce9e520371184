/**
 * The few lines of Server-Sent Events parsing the load tool needs (WHATWG HTML, "Interpreting
 * an event stream"): fields `event`, `data`, `id`; `:` comments (heartbeats) skipped; a blank
 * line dispatches; CRLF, CR and LF all end a line; a chunk may end anywhere.
 */

export interface SseMessage {
  event: string;
  data: string;
  /** The `id` field of this message, when it had one. */
  id: string | undefined;
}

export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];
  private id: string | undefined;
  /** A chunk ended on CR: an LF opening the next chunk belongs to that line end. */
  private skipLf = false;

  push(chunk: string): SseMessage[] {
    let text = chunk;
    if (this.skipLf && text.startsWith('\n')) text = text.slice(1);
    this.skipLf = text.endsWith('\r');
    this.buffer += text;
    const out: SseMessage[] = [];
    const lines = this.buffer.split(/\r\n|\r|\n/);
    // The last piece has no line end yet (or is '' after a final line end).
    this.buffer = lines.pop() ?? '';
    for (const line of lines) {
      if (line === '') {
        if (this.data.length > 0 || this.event !== '') {
          out.push({ event: this.event || 'message', data: this.data.join('\n'), id: this.id });
        }
        this.event = '';
        this.data = [];
        this.id = undefined;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
      else if (field === 'id' && !value.includes('\0')) this.id = value;
    }
    return out;
  }
}
