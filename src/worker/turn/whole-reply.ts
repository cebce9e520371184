import type { UIMessage } from 'ai';
import { SEND_PART_METADATA } from '../../shared/store/reply-send-part.js';
import type { ReplyField } from '../../shared/store/reply-streams.js';

type Chunk = { type: string } & Record<string, unknown>;
type Part = Record<string, unknown> & { type: string };

const CHAT_SEND = 'tool-chat_send';

/**
 * A turn that did not stream, as the chunks its live view would have shown, for a reader that
 * came while it ran (commit.lua writes them only then): the messages it answers, `start`, each
 * step's parts done at once, `finish`. As streamed, a chat_send is a text part carrying its
 * text, other tools are tool parts, reasoning is not shown, and a step that shows nothing is
 * left out.
 */
export function wholeReplyFields(
  response: UIMessage,
  messageIds: readonly string[],
  messageId: string,
): ReplyField[] {
  const chunks: Chunk[] = [{ type: 'start', messageId }];
  let step: Chunk[] = [];
  const endStep = () => {
    if (step.length > 0) chunks.push({ type: 'start-step' }, ...step, { type: 'finish-step' });
    step = [];
  };
  for (const [i, raw] of response.parts.entries()) {
    const part = raw as Part;
    if (part.type === 'step-start') endStep();
    else if (part.type === 'text' && typeof part.text === 'string' && part.text) {
      step.push(...textPart(`t${i}`, part.text));
    } else if (part.type === CHAT_SEND) {
      const text = (part.input as { text?: unknown } | undefined)?.text;
      if (typeof text === 'string') step.push(...textPart(String(part.toolCallId), text, true));
    } else if (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) {
      step.push(...toolPart(part));
    }
  }
  endStep();
  chunks.push({ type: 'finish' });
  return [['m', JSON.stringify(messageIds)], ...chunks.map((c): ReplyField => ['c', JSON.stringify(c)])];
}

function textPart(id: string, text: string, send = false): Chunk[] {
  return [
    send ? { type: 'text-start', id, providerMetadata: SEND_PART_METADATA } : { type: 'text-start', id },
    ...(text ? [{ type: 'text-delta', id, delta: text }] : []),
    { type: 'text-end', id },
  ];
}

/** A tool part's input once complete, then how it ended, as `UiChunker` shows a streamed one. */
function toolPart(part: Part): Chunk[] {
  const toolCallId = part.toolCallId;
  const toolName = part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
  const out: Chunk[] = [{ type: 'tool-input-available', toolCallId, toolName, input: part.input }];
  const approval = part.approval as Record<string, unknown> | undefined;
  if (approval?.id !== undefined) {
    // As streamed: a page answers the request with what it carries, its signature too.
    out.push({
      type: 'tool-approval-request',
      approvalId: approval.id,
      toolCallId,
      ...(approval.requestReason !== undefined && { reason: approval.requestReason }),
      ...(approval.isAutomatic === true && { isAutomatic: true }),
      ...(approval.signature !== undefined && { signature: approval.signature }),
    });
    if (typeof approval.approved === 'boolean')
      out.push({
        type: 'tool-approval-response',
        approvalId: approval.id,
        approved: approval.approved,
        ...(approval.reason !== undefined && { reason: approval.reason }),
      });
  }
  if (part.state === 'output-available')
    out.push({ type: 'tool-output-available', toolCallId, output: part.output });
  else if (part.state === 'output-error')
    out.push({ type: 'tool-output-error', toolCallId, errorText: part.errorText });
  else if (part.state === 'output-denied') out.push({ type: 'tool-output-denied', toolCallId });
  return out;
}
