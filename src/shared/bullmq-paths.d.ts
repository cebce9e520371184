// The modules ./bullmq.ts loads, typed as the package index types them (BullMQ ships their
// declarations for the index only).
declare module 'bullmq/dist/cjs/classes/index.js' {
  export { DelayedError, Queue, UnrecoverableError, Worker } from 'bullmq';
}
declare module 'bullmq/dist/cjs/enums/index.js' {
  export { MetricsTime } from 'bullmq';
}
