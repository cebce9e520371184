import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { approvalIdSchema } from '../../shared/store/approvals.js';
import { approvalView, refusal } from '../approvals.js';
import { HttpError } from '../errors.js';
import { parseChatKey, parseOrThrow } from '../validation.js';

/** The longest reason an answer may give (the model reads it). */
export const MAX_APPROVAL_REASON = 500;

export const approvalAnswerBody = z
  .object({ approved: z.boolean(), reason: z.string().min(1).max(MAX_APPROVAL_REASON).optional() })
  .strict();

function parseApprovalId(value: unknown): string {
  const parsed = approvalIdSchema.safeParse(value);
  if (!parsed.success) throw new HttpError('APPROVAL_NOT_FOUND', 'not an approval id');
  return parsed.data;
}

/**
 * A chat's tool approval requests over HTTP (docs/approvals.md): `GET` lists the open ones,
 * `POST …/:approvalId` answers one (202; 404 `APPROVAL_NOT_FOUND`; 409 `APPROVAL_RESOLVED`
 * when it was answered or settled already, nothing changed). The API token answers for any
 * chat; a browser token for its own.
 */
export async function approvalRoutes(app: FastifyInstance): Promise<void> {
  const approvals = app.chatlane.approvals;

  app.get('/chats/:chatKey/approvals', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    return { chatKey, approvals: (await approvals.open(chatKey)).map(approvalView) };
  });

  app.post('/chats/:chatKey/approvals/:approvalId', async (request, reply) => {
    const params = request.params as { chatKey?: unknown; approvalId?: unknown };
    const chatKey = parseChatKey(params.chatKey);
    const approvalId = parseApprovalId(params.approvalId);
    const body = parseOrThrow(approvalAnswerBody, request.body ?? undefined, 'body');
    const result = await approvals.answer(chatKey, approvalId, {
      approved: body.approved,
      reason: body.reason,
      by: request.chatlaneWebChat === undefined ? 'api' : 'web',
    });
    const refused = refusal(approvalId, result);
    if (refused) throw refused;
    return reply.code(202).send({ chatKey, approvalId, status: 'accepted' });
  });
}
