import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { QUEUE_DESCRIPTIONS, type QueueName } from '../shared/jobs.js';
import type { Logger } from '../shared/logger.js';
import { secretMatcher } from '../shared/secret.js';
import { type AuthFailures, NO_AUTH_FAILURE_LIMIT } from './auth-failures.js';
import { errorBody, type HttpError } from './errors.js';
import { securityHeaders } from './security-headers.js';

export const BOARD_PATH = '/admin/queues';

export interface AdminOptions {
  user?: string | undefined;
  password?: string | undefined;
  readOnly?: boolean | undefined;
}

/**
 * HTTP Basic auth for the board. Both user and password are hashed first, so comparing
 * takes the same time whatever was sent; both comparisons always run. Wrong credentials count
 * as a failed authentication of the address (`failures`), and an address past its limit is
 * refused with 429 before they are read.
 */
export function basicAuth(user: string, password: string, failures: AuthFailures = NO_AUTH_FAILURE_LIMIT) {
  const userMatches = secretMatcher(user);
  const passwordMatches = secretMatcher(password);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      await failures.check(request, reply);
    } catch (err) {
      // Replied here rather than thrown: the board installs its own error handler.
      const refused = err as HttpError;
      return reply.code(refused.statusCode).send(errorBody(refused.code, refused.message));
    }
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(request.headers.authorization ?? '');
    const decoded = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    const givenUser = colon >= 0 ? decoded.slice(0, colon) : '';
    const givenPassword = colon >= 0 ? decoded.slice(colon + 1) : '';
    const userOk = userMatches(givenUser);
    const passwordOk = passwordMatches(givenPassword);
    if (colon >= 0 && userOk && passwordOk) return;
    if (match) await failures.record(request);
    return reply
      .code(401)
      .header('www-authenticate', 'Basic realm="chatlane admin", charset="UTF-8"')
      .send(errorBody('UNAUTHORIZED', match ? 'wrong admin user or password' : 'admin credentials required'));
  };
}

/**
 * Bull Board at /admin/queues, behind basic auth that covers the board's routes only (an
 * encapsulated scope: /v1, /healthz and /metrics do not see the hook), with a page's security
 * headers (no framing, its own scripts only). Without both credentials the board is not mounted.
 */
export async function registerAdmin(
  app: FastifyInstance,
  queues: readonly Queue[],
  options: AdminOptions,
  logger: Logger,
  failures: AuthFailures = NO_AUTH_FAILURE_LIMIT,
  /** The prefix of the scope `app` is (the board's links are absolute). */
  prefix = '',
): Promise<boolean> {
  const { user, password } = options;
  if (!user || !password) {
    const missing = [!user && 'ADMIN_USER', !password && 'ADMIN_PASSWORD'].filter(Boolean).join(' and ');
    logger.warn(`Bull Board not mounted at ${BOARD_PATH}: set ${missing} to enable it`);
    return false;
  }
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(`${prefix}${BOARD_PATH}`);
  createBullBoard({
    queues: queues.map(
      (q) =>
        new BullMQAdapter(q, {
          readOnlyMode: options.readOnly === true,
          description: QUEUE_DESCRIPTIONS[q.name as QueueName] ?? '',
        }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'chatlane queues' } },
  });
  await app.register(async (scope) => {
    securityHeaders(scope, 'board');
    scope.addHook('onRequest', basicAuth(user, password, failures));
    await scope.register(serverAdapter.registerPlugin(), { prefix: BOARD_PATH });
  });
  logger.info({ path: `${prefix}${BOARD_PATH}`, readOnly: options.readOnly === true }, 'Bull Board mounted');
  return true;
}
