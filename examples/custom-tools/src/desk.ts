import { type Chatlane, type ChatlaneOptions, startChatlane } from 'chatlane';
import { stages } from './retrieval.js';
import { tools } from './tools.js';

export const INSTRUCTIONS = [
  'You are the order desk of a small shop. Each chat is one customer. Look orders up before',
  'you answer about them; refund only a delivered order that arrived damaged, as the refund',
  'policy says. Answer with chat_send, briefly.',
].join('\n');

/**
 * The order desk: chatlane's ingress (HTTP API, webhooks) and a worker in this process, with
 * the shop's tools, its retrieval and its instructions. Everything else — Redis, the model
 * (LLM_MODEL), ports — comes from the environment, as for the `chatlane` CLI.
 */
export function startDesk(options: Pick<ChatlaneOptions, 'env' | 'model'> = {}): Promise<Chatlane> {
  return startChatlane({
    roles: ['ingress', 'worker'],
    tools,
    stages,
    instructions: INSTRUCTIONS,
    ...options,
  });
}
