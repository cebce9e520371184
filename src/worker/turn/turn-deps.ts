import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { LanguageModel, ToolSet } from 'ai';
import { type Config, ConfigError, requireModel } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { createMetrics, type Metrics } from '../../shared/metrics.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import { ReplyStreams } from '../../shared/store/reply-streams.js';
import { approvalDepsOf } from '../agent/approval/deps.js';
import type { ToolApproval } from '../agent/approval/rules.js';
import { loadProfile } from '../agent/profile.js';
import type { ProviderFactories } from '../agent/providers.js';
import { givenModel, roleModel } from '../agent/role-model.js';
import { createSafeDownload } from '../agent/safe-download.js';
import { createSkillsTool, loadSkills, type Skill } from '../agent/skills.js';
import { prepareCustomTools } from '../agent/tools/custom-tools.js';
import { DefaultAssembler } from '../pipeline/assembler.js';
import { TokenBudgetCompressor } from '../pipeline/compressor.js';
import { withChatInstructions } from '../pipeline/instructions.js';
import { RedisProvider } from '../pipeline/provider.js';
import { contextBlockTokens } from '../pipeline/request-cache.js';
import { applyStages, type Stages } from '../pipeline/stages.js';
import type { Instructions } from '../pipeline/types.js';
import type { TurnDeps } from './turn.js';

/**
 * The hard token cut (a chat compaction has not shortened in time) drops messages in steps of
 * this many, not one per turn: the turns in between keep their cached prefix.
 */
const CUT_STEP_MESSAGES = 8;

/** Tool schemas and message framing the tokenizer does not see in the messages. */
const RESERVE_TOKENS = 400;

export function readOperatorPrompt(path: string | undefined): string | undefined {
  if (!path) return undefined;
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`SYSTEM_PROMPT_FILE: cannot read ${path}: ${(err as Error).message}`);
  }
}

/** PROFILE_DIR and SKILLS_DIR, read once at start; an unreadable directory is a ConfigError. */
export interface Capabilities {
  profile: string | undefined;
  skills: Skill[];
}

export function loadCapabilities(config: Config, logger: Logger): Capabilities {
  return { profile: loadProfile(config.PROFILE_DIR), skills: loadSkills(config.SKILLS_DIR, logger) };
}

/**
 * What a turn is built from besides the environment's configuration: the parts a process
 * already made (metrics registry, capabilities, provider factories) and what a program
 * using chatlane as a library gives in code. Each is optional; absent, the configuration's.
 */
export interface TurnParts {
  /** The instance's metrics (default: a registry of its own). */
  metrics?: Metrics;
  capabilities?: Capabilities;
  providers?: ProviderFactories;
  /**
   * An AI SDK model given in code in place of LLM_MODEL (which is then not required): observed
   * like a configured one (health, call metrics, LLM_TIMEOUT_MS per step), without fallbacks.
   */
  model?: LanguageModel;
  /** The pipeline's stages given in code, each a replacement or a wrapper of the default (stages.ts). */
  stages?: Stages;
  /**
   * The operator's prompt given in code, instead of SYSTEM_PROMPT_FILE's text: a string in the
   * static part, a function of the chat in the chat's part (see `Instructions`).
   */
  instructions?: Instructions;
  /**
   * The program's own AI SDK tools, offered to every turn after chatlane's, with the chat in
   * their `options.context` (custom-tools.ts). Check them first (`checkTools`): names are
   * not checked here.
   */
  tools?: ToolSet;
  /**
   * Which tool calls wait for a person, given in code: AI SDK 7's own `toolApproval` (a
   * function of the call, or a status or function per tool). It is asked first; a call it
   * gives no status for goes by TOOL_APPROVAL and the tool's own `needsApproval`
   * (approval/rules.ts, docs/approvals.md).
   */
  toolApproval?: ToolApproval;
}

/**
 * The operator's prompt: `instructions` given in code, else SYSTEM_PROMPT_FILE's text. Given
 * both, the code's win and the file is not read (said once at start).
 */
function operatorInstructions(
  config: Config,
  logger: Logger,
  instructions: Instructions | undefined,
): Instructions | undefined {
  if (instructions === undefined) return readOperatorPrompt(config.SYSTEM_PROMPT_FILE);
  if (config.SYSTEM_PROMPT_FILE) {
    logger.warn(
      { file: config.SYSTEM_PROMPT_FILE },
      'SYSTEM_PROMPT_FILE ignored: instructions are given in code',
    );
  }
  return instructions;
}

export function turnDepsFromConfig(
  config: Config,
  store: ChatStore,
  logger: Logger,
  parts: TurnParts = {},
): TurnDeps {
  const metrics = parts.metrics ?? createMetrics();
  const { providers } = parts;
  const capabilities = parts.capabilities ?? loadCapabilities(config, logger);
  const common = { metrics, timeoutMs: config.LLM_TIMEOUT_MS, prices: config.MODEL_PRICES };
  const { model, health, stepTimeoutMs } = parts.model
    ? givenModel(parts.model, common)
    : roleModel(requireModel(config), { ...common, logger, providers });
  const { profile, skills } = capabilities;
  const instructions = operatorInstructions(config, logger, parts.instructions);
  const stages = applyStages(
    {
      provider: new RedisProvider(store, {
        windowMessages: config.HISTORY_WINDOW_MESSAGES,
        maxPendingPerTurn: config.MAX_MESSAGES_PER_TURN,
        maxCharsPerMessage: config.MAX_CHARS_PER_MESSAGE,
      }),
      compressor: new TokenBudgetCompressor({
        maxCharsPerMessage: config.MAX_CHARS_PER_MESSAGE,
        overheadTokens: contextBlockTokens,
        cutStep: CUT_STEP_MESSAGES,
      }),
      assembler: new DefaultAssembler({
        operatorPrompt: typeof instructions === 'string' ? instructions : undefined,
        maxSendsPerTurn: config.CHAT_SEND_MAX_PER_TURN,
        profile,
        skills,
      }),
    },
    parts.stages,
  );
  const tools = parts.tools && Object.keys(parts.tools).length > 0 ? parts.tools : undefined;
  return {
    store,
    model,
    ...stages,
    // Outermost: the chat's instructions come with whatever Provider the stages made.
    ...(typeof instructions === 'function' && {
      provider: withChatInstructions(stages.provider, instructions),
    }),
    ...(skills.length > 0 && { skillsTool: createSkillsTool(skills) }),
    ...(tools && {
      customTools: prepareCustomTools(tools, {
        timeoutMs: config.TOOL_TIMEOUT_MS,
        resultMaxChars: config.TOOL_RESULT_MAX_CHARS,
        metrics,
      }),
    }),
    settings: {
      leaseMs: config.TURN_LEASE_MS,
      maxSteps: config.MAX_STEPS,
      maxMerges: config.MAX_MERGES_PER_TURN,
      maxInputTokens: config.MAX_INPUT_TOKENS,
      maxSendsPerTurn: config.CHAT_SEND_MAX_PER_TURN,
      maxCharsPerMessage: config.MAX_CHARS_PER_MESSAGE,
      reserveTokens: RESERVE_TOKENS,
      stepTimeoutMs,
      memoryMaxTokens: config.MEMORY_MAX_TOKENS,
      once: {
        maxBytes: config.ONCE_RESULT_MAX_BYTES,
        maxKeys: config.ONCE_MAX_KEYS,
        keepMs: config.ONCE_KEEP_MS,
      },
    },
    workerId: `${hostname()}:${process.pid}`,
    logger,
    // A watched turn streams its reply (the live view /v1/ui serves) on the store's connection.
    replies: new ReplyStreams(store.redis, {
      prefix: config.CHATLANE_PREFIX,
      maxEvents: config.EVENTS_MAX_LEN,
      maxLen: config.REPLY_STREAM_MAX_LEN,
      ttlMs: config.REPLY_STREAM_TTL_MS,
      events: store.events,
    }),
    platformStreaming: config.PLATFORM_STREAMING === 'on',
    replyStreaming: config.REPLY_STREAMING,
    failureNotice: config.FAILURE_NOTICE,
    ...(config.CHAT_DAILY_TOKEN_BUDGET > 0 && {
      budget: { dailyTokens: config.CHAT_DAILY_TOKEN_BUDGET, notice: config.BUDGET_NOTICE },
    }),
    download: createSafeDownload({
      maxBytes: config.FILE_FETCH_MAX_BYTES,
      timeoutMs: config.FILE_FETCH_TIMEOUT_MS,
    }),
    modelHealth: health,
    metrics,
    approvals: approvalDepsOf(config, store, parts.toolApproval, metrics),
  };
}
