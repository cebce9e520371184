import { z } from 'zod';
import type { ApprovalRecord } from '../../shared/store/approvals.js';
import { HttpError } from '../errors.js';
import { MAX_APPROVAL_REASON } from '../routes/approvals.js';

/**
 * What `useChat` sends after `addToolApprovalResponse` (docs/approvals.md, "On a web page"):
 * the conversation again, its newest message the assistant message whose tool parts the person
 * answered (`approval-responded`). Only the answers are read from it; the call each names is
 * checked against its stored request, so a page cannot have a changed call or input approved.
 */
export interface PageAnswer {
  approvalId: string;
  approved: boolean;
  reason: string | undefined;
  toolCallId: string;
  input: unknown;
  signature: string | undefined;
}

const answeredPart = z.looseObject({
  toolCallId: z.string().max(200),
  state: z.literal('approval-responded'),
  input: z.unknown(),
  approval: z.looseObject({
    id: z.string().max(100),
    approved: z.boolean(),
    reason: z.string().max(MAX_APPROVAL_REASON).optional(),
    signature: z.string().max(200).optional(),
  }),
});

/** The newest message when it answers approval requests: its answered parts, at least one. */
export const answeringMessage = z
  .looseObject({ role: z.literal('assistant'), parts: z.array(z.unknown()).max(1000) })
  .transform((m): PageAnswer[] =>
    m.parts.flatMap((p) => {
      const parsed = answeredPart.safeParse(p);
      if (!parsed.success) return [];
      const { toolCallId, input, approval } = parsed.data;
      return [
        {
          approvalId: approval.id,
          approved: approval.approved,
          reason: approval.reason,
          toolCallId,
          input,
          signature: approval.signature,
        },
      ];
    }),
  )
  .refine((answers) => answers.length > 0, {
    message:
      'the newest message must be the user message to send, or an assistant message answering approval requests (approval-responded)',
  });

/** JSON with its object keys sorted: the same value reads the same whatever the key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Why a page's answer cannot be taken for `record`, or undefined when it can. */
export function answerProblem(a: PageAnswer, record: ApprovalRecord | undefined): HttpError | undefined {
  if (!record) return new HttpError('APPROVAL_NOT_FOUND', `no approval request ${a.approvalId} in this chat`);
  const { request } = record;
  if (request.toolCallId !== a.toolCallId)
    return new HttpError('APPROVAL_MISMATCH', `approval request ${a.approvalId} is for another tool call`);
  if (canonical(request.input) !== canonical(a.input))
    return new HttpError(
      'APPROVAL_MISMATCH',
      `approval request ${a.approvalId} was made for another input: the answer is refused`,
    );
  if (request.signature !== undefined && request.signature !== a.signature)
    return new HttpError(
      'APPROVAL_MISMATCH',
      `approval request ${a.approvalId}: the signature does not match`,
    );
  return undefined;
}
