// The fake Bot API lives in src/ so `npm run demo` can run against it too.
export * from '../../src/fake-telegram/server.js';
