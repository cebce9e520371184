import type { Queue } from 'bullmq';
import { enqueueTurn, type TurnJob } from '../shared/jobs.js';
import {
  type AnswerResult,
  type ApprovalRecord,
  answerApproval,
  listApprovals,
  readApprovals,
} from '../shared/store/approvals.js';
import type { ChatStore } from '../shared/store/chat-store.js';
import { REPLY_WATCH_MS } from '../shared/store/reply-streams.js';
import { HttpError } from './errors.js';
import { withRedis } from './validation.js';

/**
 * The one way an answer to a tool approval request comes in (docs/approvals.md), whatever
 * carried it: `POST /v1/chats/:chatKey/approvals/:approvalId`, `POST /v1/ui` (useChat's
 * `addToolApprovalResponse`), a platform card's button or a "yes"/"no" reply. The answer is
 * stored once (approval-answer.lua) and the chat's turn enqueued, as an ingest does: a turn
 * that is already queued or running picks it up after.
 */
export interface Approvals {
  /**
   * Store `answer` for the request and get the chat its turn; throws HttpError for what is not
   * stored. `watched`: the sender waits for the reply (a page): the chat is marked watched with
   * the answer, so the turn that takes it streams.
   */
  answer(
    chatKey: string,
    approvalId: string,
    answer: ApprovalAnswerIn,
    opts?: { watched?: boolean },
  ): Promise<AnswerResult>;
  /** The requests that can be answered now (open and not past their expiry), oldest first. */
  open(chatKey: string): Promise<ApprovalRecord[]>;
  /** The requests of `ids` the chat holds, open or not. */
  read(chatKey: string, ids: readonly string[]): Promise<Map<string, ApprovalRecord>>;
}

export interface ApprovalAnswerIn {
  approved: boolean;
  reason?: string | undefined;
  /** Who answered: `api`, `web`, `<platform>:<userId>`. */
  by: string;
  channel?: string | undefined;
}

export interface ApprovalsDeps {
  store: ChatStore;
  turns: Queue<TurnJob>;
  /** TOOL_APPROVAL_ON_MESSAGE=supersede: a person's message already waiting settles the request first. */
  supersede: boolean;
}

export function createApprovals(deps: ApprovalsDeps): Approvals {
  const { store, turns } = deps;
  return {
    async answer(chatKey, approvalId, answer, opts) {
      const result = await withRedis(() =>
        answerApproval(store, chatKey, approvalId, answer, {
          supersede: deps.supersede,
          ...(opts?.watched && { watchMs: REPLY_WATCH_MS }),
        }),
      );
      // An answer already stored gets its turn too: an earlier attempt may have stored it and
      // failed to enqueue (the sweeper would, later).
      if (result.status === 'accepted' || result.status === 'answered')
        await withRedis(() => enqueueTurn(turns, chatKey));
      return result;
    },
    async open(chatKey) {
      const now = Date.now();
      const all = await withRedis(() => listApprovals(store, chatKey));
      return all.filter((r) => r.state === 'open' && r.request.expiresAt > now);
    },
    read: (chatKey, ids) => withRedis(() => readApprovals(store, chatKey, ids)),
  };
}

/** An answer that was not stored, as the error registry says it (404, or 409 naming why). */
export function refusal(approvalId: string, result: AnswerResult): HttpError | undefined {
  switch (result.status) {
    case 'accepted':
      return undefined;
    case 'unknown':
      return new HttpError('APPROVAL_NOT_FOUND', `no approval request ${approvalId} in this chat`);
    case 'answered':
      return new HttpError(
        'APPROVAL_RESOLVED',
        `approval request ${approvalId} was already answered (${result.answer?.approved ? 'approved' : 'denied'})`,
      );
    case 'resolved':
      return new HttpError(
        'APPROVAL_RESOLVED',
        `approval request ${approvalId} is settled (${result.resolution?.outcome ?? 'resolved'})`,
      );
    case 'expired':
      return new HttpError(
        'APPROVAL_RESOLVED',
        `approval request ${approvalId} expired at ${new Date(result.expiresAt).toISOString()}`,
      );
    case 'superseded':
      return new HttpError(
        'APPROVAL_RESOLVED',
        `approval request ${approvalId} is superseded: a newer message in the chat comes first`,
      );
  }
}

/** A request as the API lists it. */
export function approvalView(r: ApprovalRecord) {
  const { request } = r;
  return {
    id: request.id,
    toolCallId: request.toolCallId,
    tool: request.tool,
    input: request.input,
    ...(request.reason !== undefined && { reason: request.reason }),
    requestedAt: request.requestedAt,
    expiresAt: request.expiresAt,
  };
}
