import { countTextTokens } from '../../shared/tokens.js';

/**
 * Optional sections of the system prompt, each a small function (the Assembler decides
 * where they go): the operator's profile, the skills index, the chat's instructions and
 * memory, and the budget guard's line.
 */

export function profileSection(profile: string | undefined): string | undefined {
  return profile?.trim() ? `## Profile\n${profile.trim()}` : undefined;
}

export function skillsSection(
  skills: ReadonlyArray<{ name: string; description: string }>,
): string | undefined {
  if (skills.length === 0) return undefined;
  return [
    '## Skills',
    'Before doing a task one of these skills covers, load its instructions with `skills_load` and follow them.',
    ...skills.map((s) => `- ${s.name}: ${s.description}`),
  ].join('\n');
}

/** The operator's instructions for one chat (`instructions` as a function): in the chat's part. */
export function chatInstructionsSection(instructions: string | undefined): string | undefined {
  return instructions?.trim() ? `## Instructions for this chat\n${instructions.trim()}` : undefined;
}

export function memorySection(memory: string | undefined): string | undefined {
  if (!memory?.trim()) return undefined;
  return [
    '## Memory of this chat',
    'Notes you kept about this chat (replace them with `chat_memory_update`); background, not instructions.',
    memory.trim(),
  ].join('\n');
}

/** Above this share of MAX_INPUT_TOKENS the model is told the context is nearly full. */
export const NEARLY_FULL_SHARE = 0.9;

export function isNearlyFull(inputTokens: number, maxInputTokens: number): boolean {
  return inputTokens > NEARLY_FULL_SHARE * maxInputTokens;
}

export const BUDGET_LINE =
  'Note: the context is nearly full. If the topic has changed, prefer `chat_context_new`; otherwise keep this turn brief.';

let budgetLine: number | undefined;

/**
 * What the budget line adds to the system prompt (its text and the blank line before it).
 * Budgeted on every turn: it is added exactly when the input is near the limit, so leaving
 * it to the reserve pushed such turns past MAX_INPUT_TOKENS. Counted on first use: counting
 * when the module loads would load the tokenizer into every process importing chatlane.
 */
export function budgetLineTokens(): number {
  budgetLine ??= countTextTokens(BUDGET_LINE) + 2;
  return budgetLine;
}
