/**
 * How a reply stream marks the text parts that are `chat_send` calls (what the person is sent)
 * apart from plain assistant text (which no platform is sent): their `text-start` chunk
 * carries this as its `providerMetadata`, a field the AI SDK's UI message chunk schema has,
 * so the chunk stays valid for `useChat` (which keeps it on the text part).
 */
export const SEND_PART_METADATA = { chatlane: { tool: 'chat_send' } } as const;

/** A `text-start` chunk of a chat_send's text part. */
export function isSendTextStart(chunk: { type: string } & Record<string, unknown>): boolean {
  if (chunk.type !== 'text-start') return false;
  const meta = chunk.providerMetadata as { chatlane?: { tool?: unknown } } | undefined;
  return meta?.chatlane?.tool === 'chat_send';
}
