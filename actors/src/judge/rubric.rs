//! Level 2: the goal and the conversation go to the model (or the judge model) with a fixed
//! rubric, and a structured verdict comes back. The verdict is parsed strictly: anything that
//! is not the asked-for JSON counts as `Continue`, never as acceptance.

use super::{Criterion, CriterionResult, Goal};
use crate::context::summary::transcript;
use crate::message::Message;
use crate::provider::ChatRequest;
use serde::Deserialize;
use std::sync::Arc;

/// How many of the latest messages the judge reads.
const TRANSCRIPT_MESSAGES: usize = 40;

/// The judge's instructions.
pub(crate) const RUBRIC: &str =
    "You are the Judge of an autonomous agent's run. Decide whether the \
agent's final answer meets the goal and each listed criterion, from the evidence in the \
conversation only: claims the agent made without evidence do not count. Answer with one JSON \
object and nothing else:\n\
{\"verdict\": \"accept\" | \"retry\" | \"escalate\", \"reason\": \"one or two sentences\", \
\"criteria\": [{\"index\": 1, \"met\": true, \"reason\": \"...\"}]}\n\
- \"criteria\" has one entry per numbered criterion (an empty list when none are numbered).\n\
- \"accept\": the goal is met. \"retry\": it is not met yet but the agent can still meet it; \
the reason says what is missing. \"escalate\": it cannot be met (impossible, contradictory, or \
outside what the agent may do); the reason says why.";

/// The request asking the judge about `answer`, given the goal, its model-judged `criteria`
/// (numbered from 1) and the conversation.
pub(crate) fn request(
    goal: &Goal,
    criteria: &[&Criterion],
    conversation: &[Arc<Message>],
    answer: &str,
) -> ChatRequest {
    let recent = &conversation[conversation.len().saturating_sub(TRANSCRIPT_MESSAGES)..];
    let mut text = format!("Goal: {}\n\n", goal.description.trim());
    if criteria.is_empty() {
        text.push_str("No numbered criteria: judge the goal itself.\n\n");
    } else {
        text.push_str("Criteria:\n");
        for (i, c) in criteria.iter().enumerate() {
            text.push_str(&format!("{}. {}\n", i + 1, c.value));
        }
        text.push('\n');
    }
    text.push_str(&format!(
        "Conversation (latest messages):\n{}\nFinal answer:\n{}\n",
        transcript(recent),
        answer.trim()
    ));
    ChatRequest {
        system: RUBRIC.into(),
        messages: Arc::new(vec![Arc::new(Message::user(text))]),
        tools: Arc::new(Vec::new()),
    }
}

/// `text` without a Markdown code fence around it, if it has one: a fenced block is how
/// models often give JSON; prose around it is not accepted.
pub(crate) fn unfenced(text: &str) -> &str {
    let body = text.trim();
    body.strip_prefix("```json")
        .or_else(|| body.strip_prefix("```"))
        .and_then(|b| b.strip_suffix("```"))
        .map_or(body, str::trim)
}

/// What the judge model decided.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JudgeAnswer {
    pub decision: Decision,
    pub reason: String,
    /// One per model-judged criterion, in order.
    pub criteria: Vec<CriterionResult>,
}

/// The judge model's verdict word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decision {
    Accept,
    Retry,
    Escalate,
}

#[derive(Deserialize)]
struct WireVerdict {
    verdict: Decision,
    reason: String,
    criteria: Vec<WireCriterion>,
}

#[derive(Deserialize)]
struct WireCriterion {
    index: usize,
    met: bool,
    #[serde(default)]
    reason: String,
}

/// Parses the judge model's text. `None` when it is not the JSON the rubric asks for, or does
/// not answer every criterion exactly once: the caller treats that as `Continue`.
pub(crate) fn parse(text: &str, criteria: &[&Criterion]) -> Option<JudgeAnswer> {
    let wire: WireVerdict = serde_json::from_str(unfenced(text)).ok()?;
    if wire.reason.trim().is_empty() || wire.criteria.len() != criteria.len() {
        return None;
    }
    let mut results = Vec::with_capacity(criteria.len());
    for (i, criterion) in criteria.iter().enumerate() {
        let answer = wire.criteria.iter().find(|c| c.index == i + 1)?;
        results.push(CriterionResult {
            criterion: criterion.to_string(),
            met: answer.met,
            reason: answer.reason.clone(),
        });
    }
    Some(JudgeAnswer {
        decision: wire.verdict,
        reason: wire.reason,
        criteria: results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llm(q: &str) -> Criterion {
        format!("llm:{q}").parse().unwrap()
    }

    #[test]
    fn a_well_formed_verdict_is_read() {
        let c = llm("the tests pass");
        let got = parse(
            "```json\n{\"verdict\":\"retry\",\"reason\":\"one test fails\",\"criteria\":[{\"index\":1,\"met\":false,\"reason\":\"test_x fails\"}]}\n```",
            &[&c],
        )
        .unwrap();
        assert_eq!(got.decision, Decision::Retry);
        assert!(!got.criteria[0].met);
    }

    #[test]
    fn anything_else_is_no_verdict() {
        let c = llm("the tests pass");
        for garbage in [
            "ACCEPT!!! Looks great to me.",
            "Sure! {\"verdict\":\"accept\",\"reason\":\"ok\",\"criteria\":[{\"index\":1,\"met\":true}]}",
            "{\"verdict\":\"accepted\",\"reason\":\"ok\",\"criteria\":[{\"index\":1,\"met\":true}]}",
            "{\"verdict\":\"accept\",\"reason\":\"\",\"criteria\":[{\"index\":1,\"met\":true}]}",
            "{\"verdict\":\"accept\",\"reason\":\"ok\",\"criteria\":[]}",
            "{\"verdict\":\"accept\",\"reason\":\"ok\",\"criteria\":[{\"index\":2,\"met\":true}]}",
            "",
        ] {
            assert_eq!(parse(garbage, &[&c]), None, "{garbage}");
        }
    }
}
