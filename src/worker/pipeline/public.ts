/**
 * The pipeline's public surface, as a program using chatlane imports it (the package entry
 * re-exports this module): the stages' interfaces and their input and output types, the
 * default implementations, the `stages` and `instructions` options, and the helpers a stage
 * needs to keep the token budget and the prompt-cache layout (docs/pipeline-stages.md).
 */

export type { ChatMessage, MessageMetadata } from '../../shared/messages.js';
export type { RetrievedDocument, RetrievedPart } from '../../shared/retrieved.js';
export { RETRIEVED_PART } from '../../shared/retrieved.js';
export type { InboxEntry, TurnInput, TurnReads } from '../../shared/store/chat-store.js';
export { countTextTokens } from '../../shared/tokens.js';
export { type AssemblerOptions, DefaultAssembler } from './assembler.js';
export {
  type BudgetReport,
  type BudgetResult,
  SimpleCompressor,
  type SimpleCompressorOptions,
  TokenBudgetCompressor,
  type TokenBudgetCompressorOptions,
} from './compressor.js';
export { RedisProvider } from './provider.js';
export { budgetLineTokens } from './sections.js';
export {
  applyStages,
  type PipelineStages,
  StageError,
  type StageOption,
  type Stages,
  withRetrieved,
} from './stages.js';
export type {
  Assembled,
  AssembleInput,
  Assembler,
  ChatInstructions,
  CompressionReport,
  CompressionResult,
  Compressor,
  Instructions,
  InstructionsContext,
  Provider,
  ProviderResult,
  RuntimeContext,
} from './types.js';
