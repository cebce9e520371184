import type { FastifyInstance } from 'fastify';
import type { PlatformRuntime } from '../../shared/platforms/runtime.js';
import { HttpError } from '../errors.js';

/**
 * `GET /webhooks/:platform` for platforms that check their endpoint with a GET before
 * sending anything (Meta's WhatsApp `hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`):
 * handed to the adapter, which echoes the challenge when the token matches. Reads and writes
 * nothing in Redis. Every other platform, and a platform not enabled, answers 404.
 */
export function platformVerifyRoute(
  app: FastifyInstance,
  runtime: PlatformRuntime | undefined,
  refusal: (name: string, response: Response) => Promise<HttpError>,
): void {
  app.get('/webhooks/:platform', async (request, reply) => {
    const name = (request.params as { platform?: string }).platform ?? '';
    const platform = runtime?.platforms.get(name);
    if (!runtime || !platform?.module.verifiesWithGet) {
      throw new HttpError(
        'PLATFORM_NOT_ENABLED',
        `platform '${name.slice(0, 64)}' takes no GET on this server`,
      );
    }
    const headers = new Headers();
    for (const [key, value] of Object.entries(request.headers)) {
      if (typeof value === 'string') headers.set(key, value);
    }
    const url = `http://${request.headers.host ?? 'localhost'}${request.url}`;
    const response = await runtime.chat.webhooks[name]!(new Request(url, { method: 'GET', headers }));
    if (response.status >= 400) throw await refusal(name, response);
    return reply
      .code(response.status)
      .header('content-type', 'text/plain; charset=utf-8')
      .send(await response.text());
  });
}
