import { startDesk } from './desk.js';

// `npm start`: the order desk, until SIGTERM or Ctrl-C. Needs REDIS_URL and LLM_MODEL (see README).
const lane = await startDesk();
console.log(`order desk listening on ${lane.url}`);
const stop = () => void lane.close();
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
