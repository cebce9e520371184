/** About `chars` characters of paragraphs of numbered sentences ("Sentence 0 …", "Sentence 1 …"). */
export function longAnswer(chars: number): string {
  const paragraphs: string[] = [];
  let n = 0;
  while (paragraphs.join('\n\n').length < chars) {
    paragraphs.push(
      Array.from({ length: 6 }, () => `Sentence ${n++} of the answer explains one more thing.`).join(' '),
    );
  }
  return paragraphs.join('\n\n');
}

/** The sentence numbers in `texts`, in the order they arrived: whole and in order is 0, 1, 2, … */
export function sentenceNumbers(texts: string[]): number[] {
  return [...texts.join(' ').matchAll(/Sentence (\d+) /g)].map((m) => Number(m[1]));
}

/** 0 … n−1. */
export function upTo(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
