/**
 * How many uncommitted sends a chat keeps (a long chain of crashed turns keeps the newest).
 * Its own module, free of imports, because config.ts bounds CHAT_SEND_MAX_PER_TURN by it.
 */
export const MAX_UNCOMMITTED_SENDS = 100;
