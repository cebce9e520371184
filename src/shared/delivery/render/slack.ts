import { replaceBareMentions } from '@chat-adapter/shared';
import { markdownBlock } from './common.js';
import { oneFormat, type ReplyFormat } from './format.js';
import { resolveReferences } from './markdown.js';

/**
 * Slack: Markdown, posted as `markdown_text` (what `@chat-adapter/slack` does with
 * `{ markdown }`; Slack renders it, links and tables included, and reads backslash escapes),
 * so each block goes as the model wrote it. `markdown_text` takes 12,000 characters, counted
 * after the adapter links bare `@name` mentions (`<@name>`).
 */
export const slackFormat: ReplyFormat = {
  id: 'slack.1',
  limit: 12_000,
  measure: (text) => replaceBareMentions(text, (_mention, name) => `<@${name}>`).length,
  prepare: (root) => resolveReferences(root),
  block: markdownBlock,
  message: (text) => ({ markdown: text }),
};

export const slackReplies = oneFormat(slackFormat);
