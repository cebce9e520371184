/**
 * One output stream of a command, kept to at most `max` bytes however much the command writes:
 * its first half and its last half (a build's error is usually at the end, what ran at the
 * start), with the count of bytes left out between them. Memory stays under ~2 × max: the
 * tail is cut back to its half whenever it has grown to twice that.
 */
export class CappedOutput {
  private readonly headMax: number;
  private readonly tailMax: number;
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  /** Every byte the stream carried. */
  total = 0;

  constructor(max: number) {
    this.headMax = Math.ceil(max / 2);
    this.tailMax = max - this.headMax;
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.headBytes < this.headMax) {
      const take = Math.min(this.headMax - this.headBytes, rest.length);
      this.head.push(rest.subarray(0, take));
      this.headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    this.tail.push(rest);
    this.tailBytes += rest.length;
    if (this.tailBytes > 2 * this.tailMax) this.trimTail();
  }

  private trimTail(): void {
    const all = Buffer.concat(this.tail, this.tailBytes);
    // A copy: a slice would keep the whole concatenation alive.
    const kept = Buffer.from(all.subarray(Math.max(0, all.length - this.tailMax)));
    this.tail = [kept];
    this.tailBytes = kept.length;
  }

  /** Bytes left out between the head and the tail. */
  get dropped(): number {
    return Math.max(0, this.total - this.headMax - this.tailMax);
  }

  /** The text the model gets: all of it, or head, a note of what was left out, tail. */
  text(): string {
    const head = Buffer.concat(this.head, this.headBytes).toString('utf8');
    if (this.dropped === 0) return head + Buffer.concat(this.tail, this.tailBytes).toString('utf8');
    this.trimTail();
    return `${head}\n[... ${this.dropped} bytes left out ...]\n${this.tail[0]!.toString('utf8')}`;
  }
}
