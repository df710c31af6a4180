//! Span names and attribute keys: the OpenTelemetry GenAI semantic conventions
//! (semantic-conventions v1.37, `gen-ai-spans.md` and `gen-ai-agent-spans.md`), and Ryvos's own
//! under `ryvos.`.

pub(crate) const INVOKE_AGENT: &str = "invoke_agent";
pub(crate) const CHAT: &str = "chat";
pub(crate) const EXECUTE_TOOL: &str = "execute_tool";
/// The spans of the runtime's own steps (the conventions have no operation for them).
pub(crate) const JUDGE: &str = "ryvos.judge";
pub(crate) const SUMMARIZE: &str = "ryvos.summarize";
/// The run span's event for a compaction: what it dropped and kept.
pub(crate) const COMPACTION: &str = "ryvos.compaction";
/// The run span's event for a park: why, and what continues it.
pub(crate) const PARKED: &str = "ryvos.run.parked";
pub(crate) const PARK_REASON: &str = "ryvos.park.reason";
/// The agent's name on its spans.
pub(crate) const AGENT_NAME: &str = "ryvos";

pub(crate) const OPERATION_NAME: &str = "gen_ai.operation.name";
pub(crate) const AGENT_NAME_KEY: &str = "gen_ai.agent.name";
pub(crate) const CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub(crate) const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub(crate) const REQUEST_MODEL: &str = "gen_ai.request.model";
pub(crate) const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub(crate) const RESPONSE_ID: &str = "gen_ai.response.id";
pub(crate) const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub(crate) const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub(crate) const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub(crate) const TOOL_NAME: &str = "gen_ai.tool.name";
pub(crate) const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub(crate) const TOOL_TYPE: &str = "gen_ai.tool.type";
pub(crate) const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub(crate) const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
pub(crate) const SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
pub(crate) const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub(crate) const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub(crate) const TOKEN_TYPE: &str = "gen_ai.token.type";
pub(crate) const ERROR_TYPE: &str = "error.type";

pub(crate) const RUN_ID: &str = "ryvos.run.id";
pub(crate) const RUN_STATUS: &str = "ryvos.run.status";
pub(crate) const RUN_TURNS: &str = "ryvos.run.turns";
pub(crate) const RUN_COST_CENTS: &str = "ryvos.run.cost_cents";
pub(crate) const TOOL_TIER: &str = "ryvos.tool.tier";
pub(crate) const TOOL_ALLOWED: &str = "ryvos.tool.allowed";
pub(crate) const TOOL_DECIDED_BY: &str = "ryvos.tool.decided_by";
pub(crate) const JUDGE_CRITERIA: &str = "ryvos.judge.criteria";
pub(crate) const JUDGE_VERDICT: &str = "ryvos.judge.verdict";
pub(crate) const JUDGE_SCORE: &str = "ryvos.judge.score";
pub(crate) const JUDGE_REASON: &str = "ryvos.judge.reason";
pub(crate) const SUMMARY_MESSAGES: &str = "ryvos.summary.messages";
