/** Chat templates (Jinja) and streaming parsers for reasoning and tool calls. */
export { ChatError, type ChatErrorCode } from "./errors.ts";
export {
  type ChatMessage,
  ChatMessageSchema,
  type ChatTool,
  type ChatToolCall,
  parseMessages,
  parseTools,
  ToolSchema,
} from "./messages.ts";
export {
  type AddedSpecials,
  ChatTemplate,
  chatTemplateFromGguf,
  type RenderOptions,
  type SpecialTokenTexts,
} from "./template.ts";
export { type ChatFormat, detectChatFormat, type ToolCallSyntax } from "./format.ts";
export {
  collect,
  type OutputEvent,
  OutputParser,
  type OutputParserOptions,
  type ParsedOutput,
  parseOutput,
} from "./output_parser.ts";
export { type ParsedToolCall, parseToolCallBody } from "./tool_calls.ts";
export { promptOpensReasoning, THINK_CLOSE, THINK_OPEN } from "./reasoning.ts";
