import type { TextStreamPart, ToolSet } from 'ai';
import { SEND_PART_METADATA } from '../../../shared/store/reply-send-part.js';
import { JsonTextField } from './json-text-field.js';

/** An AI SDK UI message chunk as the reply stream stores it (`UIMessageChunk` of 'ai'). */
export type UiChunk = { type: string } & Record<string, unknown>;

const CHAT_SEND = 'chat_send';

/** A chat_send whose input is being generated: the text so far, shown as a text part. */
interface SendInput {
  text: JsonTextField;
  shown: string;
}

function textOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const text = (value as { text?: unknown }).text;
  return typeof text === 'string' ? text : undefined;
}

/**
 * The model's stream (`streamText`'s fullStream) as the UI message chunks a person's page
 * shows: what the person reads is what `chat_send` sends, so a chat_send call is a text part
 * that grows as the model generates the tool input (partial-JSON parsing of the input so
 * far); plain assistant text is a text part too; other tools are tool parts (their input
 * deltas are not kept, only the input once complete and the output). Reasoning, sources and
 * files are not shown.
 *
 * Synchronous on purpose: it runs for every part of every model stream, and an async method
 * would add a promise per part.
 */
export class UiChunker {
  private readonly sends = new Map<string, SendInput>();
  /**
   * A step has started and shown nothing yet. Its `start-step` waits for the step's first
   * chunk, and a step that shows nothing (the model's last step after a chat_send is often
   * empty) is left out of the live view: a reply stream write less per turn.
   */
  private stepPending = false;
  /** A step's `start-step` went out and its `finish-step` not yet. */
  private stepShown = false;
  /** Plain text parts started and not yet ended. */
  private readonly texts = new Set<string>();

  constructor(private readonly out: (chunk: UiChunk) => void) {}

  private emit(chunk: UiChunk): void {
    if (this.stepPending) {
      this.stepPending = false;
      this.stepShown = true;
      this.out({ type: 'start-step' });
    }
    this.out(chunk);
  }

  push(part: TextStreamPart<ToolSet>): void {
    switch (part.type) {
      case 'start-step':
        this.stepPending = true;
        return;
      case 'finish-step':
        if (this.stepPending) this.stepPending = false;
        else this.out({ type: 'finish-step' });
        this.stepShown = false;
        return;
      case 'text-start':
        this.texts.add(part.id);
        this.emit({ type: 'text-start', id: part.id });
        return;
      case 'text-delta':
        if (part.text) this.emit({ type: 'text-delta', id: part.id, delta: part.text });
        return;
      case 'text-end':
        this.texts.delete(part.id);
        this.emit({ type: 'text-end', id: part.id });
        return;
      case 'tool-input-start':
        if (part.toolName === CHAT_SEND) {
          this.sends.set(part.id, { text: new JsonTextField('text'), shown: '' });
          this.emit({ type: 'text-start', id: part.id, providerMetadata: SEND_PART_METADATA });
        } else {
          this.emit({ type: 'tool-input-start', toolCallId: part.id, toolName: part.toolName });
        }
        return;
      case 'tool-input-delta': {
        const send = this.sends.get(part.id);
        if (!send) return;
        const added = send.text.push(part.delta);
        if (added) {
          this.emit({ type: 'text-delta', id: part.id, delta: added });
          send.shown += added;
        }
        return;
      }
      case 'tool-call':
        if (part.toolName === CHAT_SEND) {
          this.endSend(part.toolCallId, textOf(part.input) ?? '');
        } else {
          this.emit({
            type: 'tool-input-available',
            toolCallId: part.toolCallId,
            toolName: part.toolName,
            input: part.input,
          });
        }
        return;
      case 'tool-result':
        if (part.toolName !== CHAT_SEND) {
          this.emit({ type: 'tool-output-available', toolCallId: part.toolCallId, output: part.output });
        }
        return;
      case 'tool-error':
        if (part.toolName !== CHAT_SEND) {
          const errorText = part.error instanceof Error ? part.error.message : String(part.error);
          this.emit({ type: 'tool-output-error', toolCallId: part.toolCallId, errorText });
        }
        return;
      // Tool approval (docs/approvals.md), as the AI SDK's UI stream carries it: the page shows
      // the call waiting for a person, then, on the turn that goes on, its outcome.
      case 'tool-approval-request':
        this.emit({
          type: 'tool-approval-request',
          approvalId: part.approvalId,
          toolCallId: part.toolCall.toolCallId,
          ...(part.reason !== undefined && { reason: part.reason }),
          ...(part.isAutomatic && { isAutomatic: true }),
          ...(part.signature !== undefined && { signature: part.signature }),
        });
        return;
      case 'tool-approval-response':
        if (!part.providerExecuted)
          this.emit({
            type: 'tool-approval-response',
            approvalId: part.approvalId,
            approved: part.approved,
            ...(part.reason !== undefined && { reason: part.reason }),
          });
        return;
      case 'tool-output-denied':
        this.emit({ type: 'tool-output-denied', toolCallId: part.toolCallId });
        return;
      default:
        return;
    }
  }

  /** The text grows only by appending; a parse that rewrote earlier text waits for the complete input. */
  private show(id: string, send: SendInput, text: string): void {
    if (text.length <= send.shown.length || !text.startsWith(send.shown)) return;
    this.emit({ type: 'text-delta', id, delta: text.slice(send.shown.length) });
    send.shown = text;
  }

  /** The complete input: the rest of its text, and the part closed (opened first if the input never streamed). */
  private endSend(id: string, text: string): void {
    let send = this.sends.get(id);
    if (!send) {
      send = { text: new JsonTextField('text'), shown: '' };
      this.emit({ type: 'text-start', id, providerMetadata: SEND_PART_METADATA });
    }
    this.show(id, send, text);
    this.sends.delete(id);
    this.emit({ type: 'text-end', id });
  }

  /** Text parts of sends cut short (the step was aborted): closed so a page is not left with an open part. */
  closeOpen(): void {
    for (const id of this.sends.keys()) this.emit({ type: 'text-end', id });
    this.sends.clear();
  }

  /**
   * A step's model call was aborted for a new message (LANE_POLICY=interrupt): every part it
   * had opened is closed and the step ended, so a page shows the cut part done and the
   * restarted step's parts after it. What was cut was never sent.
   */
  cut(): void {
    this.closeOpen();
    for (const id of this.texts) this.emit({ type: 'text-end', id });
    this.texts.clear();
    if (this.stepShown) this.out({ type: 'finish-step' });
    this.stepShown = false;
    this.stepPending = false;
  }
}
