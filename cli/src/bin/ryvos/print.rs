//! How `ryvos` prints the daemon's answers: each from its typed result.

use crate::out::outln;
use ryvos::protocol::{HistoryResult, StatusResult};
use ryvos_protocol::records::{
    ApprovalKind, Compaction, CompactionNote, PendingApproval, SessionRecord,
};
use ryvos_protocol::report::{CostReport, Spend};
use ryvos_protocol::Message;

pub fn status(s: &StatusResult) {
    outln!(
        "ryvosd is running: pid {}, version {}, up {}s, home {}",
        s.pid,
        s.version,
        s.uptime_secs,
        s.home
    );
    outln!("sandbox: {}", s.sandbox);
    if let Some(console) = &s.console {
        outln!("console: {console} (`ryvos console` logs in)");
    }
    let store = match &s.store_security {
        Some(security) => format!("{} ({security})", s.store),
        None => s.store.clone(),
    };
    match &s.store_fault {
        None => outln!("store: {store}"),
        Some(fault) => {
            outln!("store: {store}, DEGRADED: it cannot write ({fault}); runs fail until it can")
        }
    }
    for server in &s.mcp {
        mcp_server(server);
    }
    if s.in_flight.is_empty() {
        outln!("no run in flight");
    }
    let now = ryvos::shared_store::now_ms();
    for run in &s.in_flight {
        outln!(
            "in flight: run {} (session {}), started {}: {}  (`ryvos follow {}`)",
            run.run_id,
            run.session_id,
            ago(now.saturating_sub(run.started_at_ms)),
            run.prompt,
            run.run_id
        );
    }
    for run in &s.parked {
        outln!(
            "parked: run {} (session {}), {}, {} spent: {}",
            run.run_id,
            run.session_id,
            run.reason,
            money(run.cost_cents),
            goes_on(run)
        );
    }
}

/// How a parked run goes on: at its own budget, with a larger one; at the month's limit, by
/// itself once the month turns or the limit is raised (or now, with `continue`).
fn goes_on(run: &ryvos::protocol::ParkedRun) -> String {
    let id = &run.run_id;
    match run.reason {
        ryvos::protocol::event::ParkReason::BudgetRun => format!(
            "`ryvos continue {id} --budget-cents N`, N above {} (its new budget)",
            run.cost_cents.ceil() as u64
        ),
        ryvos::protocol::event::ParkReason::BudgetMonth => format!(
            "goes on by itself when the month turns or [budget] monthly_limit_cents is raised; \
             `ryvos continue {id}` tries now"
        ),
        _ => format!("`ryvos continue {id}` or `ryvos stop {id}`"),
    }
}

/// Every configured MCP server, a line each.
pub fn mcp_servers(servers: &[ryvos_protocol::mcp::McpServerStatus]) {
    if servers.is_empty() {
        outln!("no MCP servers are configured ([mcp.servers.NAME] in the config)");
    }
    for server in servers {
        mcp_server(server);
    }
}

/// One MCP server's line: its name, state, tools and restarts.
pub fn mcp_server(server: &ryvos_protocol::mcp::McpServerStatus) {
    use ryvos_protocol::mcp::McpServerState;
    let restarts = match server.restarts {
        0 => String::new(),
        n => format!(", restarted {n} times"),
    };
    match server.state {
        McpServerState::Ready => outln!(
            "mcp: {} ready ({}, MCP {}), {} tools{restarts}: {}",
            server.name,
            server.transport,
            server.revision.as_deref().unwrap_or("revision unknown"),
            server.tools.len(),
            server.tools.join(", ")
        ),
        McpServerState::Starting => {
            outln!(
                "mcp: {} starting ({}){restarts}",
                server.name,
                server.transport
            )
        }
        McpServerState::Down => outln!(
            "mcp: {} DOWN ({}){restarts}: {}",
            server.name,
            server.transport,
            server.reason.as_deref().unwrap_or("")
        ),
    }
}

/// One line per session, most recent first: its id, when it was last used, how its latest
/// run ended, and its first prompt.
pub fn sessions(sessions: &[SessionRecord]) {
    if sessions.is_empty() {
        outln!("no sessions yet");
    }
    let now = ryvos::shared_store::now_ms();
    for s in sessions {
        // No status: a run in flight, or a session stored before statuses were kept.
        let status = s
            .last_status
            .map_or_else(|| "-".to_owned(), |s| s.to_string());
        // A parked run says what goes on with it.
        let parked = match (&s.last_run, s.last_status) {
            (Some(run), Some(ryvos::RunStatus::Parked)) => {
                format!("  (run {run} parked: `ryvos status` says how it goes on)")
            }
            _ => String::new(),
        };
        outln!(
            "{}  {:>8}  {status:<21}  {:>4} msgs  {}{parked}",
            s.session_id,
            ago(now.saturating_sub(s.updated_at_ms)),
            s.message_count,
            s.title.as_deref().unwrap_or("")
        );
    }
}

/// One line per token: its name, its scope and when it was made; never its secret.
pub fn tokens(tokens: &[ryvos::access::TokenInfo]) {
    if tokens.is_empty() {
        outln!("no tokens; `ryvos token create NAME` makes one");
    }
    let now = ryvos::shared_store::now_ms();
    for token in tokens {
        let made = ago(now.saturating_sub(token.created_ms));
        outln!(
            "{:<24}  {:<7}  made {made}",
            token.name,
            token.scope.as_str()
        );
    }
}

/// `ms` as a person says it: `42s ago`, `5m ago`, `3h ago`, `2d ago`.
fn ago(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86400),
    }
}

/// When and where a call in doubt started, as far as the audit says: ` (started 3m ago on
/// pid 4242)`.
fn started(p: &PendingApproval) -> String {
    let when = (p.started_at_ms)
        .map(|at| format!(" {}", ago(ryvos::shared_store::now_ms().saturating_sub(at))));
    let on = (p.started_on.as_deref()).map(|node| format!(" on {node}"));
    match (when, on) {
        (None, None) => String::new(),
        (when, on) => format!(
            " (started{}{})",
            when.unwrap_or_default(),
            on.unwrap_or_default()
        ),
    }
}

pub fn approvals(pending: &[PendingApproval]) {
    if pending.is_empty() {
        outln!("no tool call is waiting for approval");
    }
    for p in pending {
        let state = match (p.paused, p.answer.as_ref().map(|a| a.approved)) {
            (true, Some(true)) => "  [run paused; approved, runs on resume]",
            (true, Some(false)) => "  [run paused; denied]",
            (true, None) => "  [run paused; asked again on resume]",
            (false, _) => "",
        };
        // A call a crash cut off: approving runs it again, with the same idempotency key.
        let in_doubt = match p.kind {
            ApprovalKind::InDoubt => format!(
                "[in doubt: cut off by a crash{}; approve to run it again] ",
                started(p)
            ),
            ApprovalKind::Call => String::new(),
        };
        outln!(
            "{}  {in_doubt}{:?} {}  {}  (session {}){state}",
            p.request_id,
            p.tier,
            p.tool,
            p.input,
            p.session_id
        );
    }
}

pub fn history(h: &HistoryResult) {
    let last = h.compaction.as_ref();
    let earlier = last.map_or(&[][..], |c| c.earlier.as_slice());
    for m in &h.messages {
        for note in earlier.iter().filter(|n| n.first_kept_seq == m.seq) {
            compacted(note, h.session.session_id.as_str(), false);
        }
        if let Some(c) = last.filter(|c| c.first_kept_seq == m.seq) {
            compaction(c, h.session.session_id.as_str());
        }
        let (role, text) = match m.message.as_ref() {
            Message::User { content } => ("user", content.as_str()),
            Message::Assistant { content, .. } => ("assistant", content.as_str()),
            Message::ToolResult { content, .. } => ("tool_result", content.as_str()),
            Message::System { content } => ("system", content.as_str()),
        };
        outln!("[{}] {role}: {text}", m.seq);
        for call in m.message.tool_calls() {
            outln!("      call {} {} {}", call.id, call.name, call.arguments);
        }
        for t in h.turns.iter().filter(|t| t.last_seq == m.seq) {
            let rewind = match &t.not_rewindable {
                None => String::new(),
                Some(why) => format!("; cannot be rewound to: {why}"),
            };
            outln!(
                "--- turn {} (run {}, its turn {}){rewind}",
                t.turn,
                t.run_id,
                t.run_turn
            );
        }
    }
    for r in &h.runs {
        let status = r.status.map_or("in flight", |s| s.as_str());
        let model = r
            .model
            .as_deref()
            .map(|m| format!(", {m}"))
            .unwrap_or_default();
        outln!("run {}: {status} ({} turns{model})", r.run_id, r.turns);
    }
    for a in &h.audit {
        let decision = if a.allowed { "allowed" } else { "denied" };
        let why = a
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        outln!(
            "audit {} {} ({}) {decision} by {}{why}",
            a.call_id,
            a.tool,
            format!("{:?}", a.tier),
            a.decided_by
        );
    }
}

/// The session's last compaction, where its window starts.
fn compaction(c: &Compaction, session: &str) {
    if let Some(point) = &c.rewound_to {
        outln!(
            "--- rewound to {point}: the window starts here, with the messages it held then; \
             `ryvos rewind {session} --undo` goes back"
        );
        return;
    }
    if c.undone_at_ms.is_some() {
        outln!("--- the window starts here again (its last compaction was undone)");
        return;
    }
    compacted(&CompactionNote::of(c), session, true);
    if !c.facts_dropped.is_empty() {
        outln!(
            "    left out past [agent] summary_facts: {}",
            c.facts_dropped.join("; ")
        );
    }
}

/// One compaction, where it ended; `last` for the one `compact undo` undoes.
fn compacted(c: &CompactionNote, session: &str, last: bool) {
    let by = c
        .model
        .as_deref()
        .map(|m| format!(" by {m}"))
        .unwrap_or_default();
    let how = match c.summarized {
        true => format!("left the window behind a summary{by}"),
        false => "left the window".to_owned(),
    };
    let undo = match last {
        true => format!("; `ryvos compact undo {session}` brings them back"),
        false => String::new(),
    };
    outln!(
        "--- compacted: messages {}-{} {how}; {} -> {} tokens{undo}",
        c.first_seq,
        c.first_kept_seq.saturating_sub(1),
        c.tokens_before,
        c.tokens_after
    );
    if !c.facts_kept.is_empty() {
        outln!(
            "    exact facts kept below the summary: {}",
            c.facts_kept.join("; ")
        );
    }
}

/// Cents as dollars: two decimals, four below one cent, and "under $0.0001" for less.
pub fn money(cents: f64) -> String {
    if cents >= 1.0 || cents == 0.0 {
        format!("${:.2}", cents / 100.0)
    } else if cents >= 0.01 {
        format!("${:.4}", cents / 100.0)
    } else {
        "under $0.0001".to_owned()
    }
}

fn limit(cents: u64) -> String {
    match cents {
        0 => "no limit".to_owned(),
        c => money(c as f64),
    }
}

fn spend(s: &Spend) -> String {
    format!(
        "{:>10}  {:>5} calls  {} in / {} out tokens",
        money(s.cost_cents),
        s.calls,
        s.input_tokens,
        s.output_tokens
    )
}

/// `ryvos cost`: this month against the limits, then each day and each session.
pub fn cost(r: &CostReport) {
    outln!(
        "this month ({}, UTC): {} spent; monthly limit {}, warning at {}; per-run limit {}",
        r.month.key,
        money(r.month.cost_cents),
        limit(r.monthly_limit_cents),
        limit(r.warning_threshold_cents),
        limit(r.per_run_limit_cents),
    );
    if let Some(until) = &r.refused_until {
        outln!("  the monthly limit is reached: new runs are refused until {until} (UTC)");
    }
    outln!("by day:");
    for day in &r.days {
        outln!("  {}  {}", day.key, spend(day));
    }
    outln!("by session (all time, most spent first):");
    for session in &r.sessions {
        outln!("  {:<28}  {}", session.key, spend(session));
    }
    if r.session_count > r.sessions.len() {
        outln!("  … and {} more", r.session_count - r.sessions.len());
    }
    if r.month.estimated_calls > 0 {
        outln!(
            "{} call(s) this month had no usage from the server; their tokens were estimated",
            r.month.estimated_calls
        );
    }
}
