//! Where in a call's life the crash loop kills the daemon, and how it gets the daemon there.
//!
//! Each point is reached by what the daemon says (its events) and held open where it would
//! otherwise pass in a moment: the model streams slowly before a call's intent is durable; a
//! person's stand-in leaves approval requests unanswered, so a call whose intent is durable
//! waits before it starts; a command and the MCP charge wait for a `go` file, so a kill lands
//! inside them. A result's commit after a call ends is not held: the kill races it, and the
//! loop counts where kills landed by what the next runs recover.

use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The points of a call's life a kill is aimed at, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Point {
    /// The model is streaming the turn that makes the call: nothing of it is stored.
    BeforeIntent,
    /// The turn that makes the call is durable; the call waits for its approval.
    BeforeStart,
    /// The call is running (a command before or after its append, a charge after its key
    /// is recorded).
    During,
    /// The call ended; its result's commit is under way.
    BeforeResult,
    /// The turn with the call's result is durable.
    After,
}

pub const POINTS: [Point; 5] = [
    Point::BeforeIntent,
    Point::BeforeStart,
    Point::During,
    Point::BeforeResult,
    Point::After,
];

/// The tools the model calls, one per effect class (the charge only where the keyed MCP
/// server runs).
pub const TOOLS: [&str; 4] = ["bash", "write", "glob", "keyed__charge"];

/// What holds the daemon at a point: shared with the model and the clients.
#[derive(Clone)]
pub struct Holds {
    /// The model's pause between chunks, in ms.
    pub pause_ms: Arc<AtomicU64>,
    /// Approval requests are left unanswered.
    pub asks: Arc<AtomicBool>,
    /// Commands and charges run on only while this file exists.
    pub go: PathBuf,
}

impl Holds {
    pub fn new(workspace: &Path) -> Self {
        let go = workspace.join("go");
        std::fs::write(&go, "").unwrap();
        Self {
            pause_ms: Arc::new(AtomicU64::new(2)),
            asks: Arc::new(AtomicBool::new(false)),
            go,
        }
    }

    /// Holds the daemon where `aim` needs it.
    pub fn hold(&self, aim: &Aim) {
        match aim.point {
            Point::BeforeIntent => self.pause_ms.store(400, Ordering::Relaxed),
            Point::BeforeStart => self.asks.store(true, Ordering::Relaxed),
            Point::During => std::fs::remove_file(&self.go).unwrap(),
            Point::BeforeResult | Point::After => {}
        }
    }

    /// Lets everything go on again, after the kill.
    pub fn release(&self) {
        self.pause_ms.store(2, Ordering::Relaxed);
        self.asks.store(false, Ordering::Relaxed);
        std::fs::write(&self.go, "").unwrap();
    }
}

/// A kill aimed at `point` of a call of `tool`.
#[derive(Clone, Debug)]
pub struct Aim {
    pub point: Point,
    pub tool: &'static str,
    /// Sessions whose call of `tool` ended, for [`Point::After`].
    ended: HashSet<String>,
}

impl Aim {
    /// The `n`th aimed kill: every point in turn, for each tool in turn.
    pub fn nth(n: usize, tools: usize) -> Self {
        Self {
            point: POINTS[n % POINTS.len()],
            tool: TOOLS[(n / POINTS.len()) % tools],
            ended: HashSet::new(),
        }
    }

    /// Whether `event` puts the daemon where the kill is aimed.
    pub fn reached(&mut self, event: &Value) -> bool {
        let tool = |field: &str| event[field] == self.tool;
        match (self.point, event["type"].as_str().unwrap_or_default()) {
            (Point::BeforeIntent, "TextDelta") => event["text"] == "Calling ",
            // A read never asks: for `glob`, any call waiting for its approval will do.
            (Point::BeforeStart, "ApprovalRequested") => {
                event.get("kind").is_none() && (tool("tool") || self.tool == "glob")
            }
            (Point::During, "ToolStart") => tool("name"),
            (Point::BeforeResult, "ToolEnd") => tool("name"),
            (Point::After, "ToolEnd") => {
                if tool("name") {
                    self.ended.insert(session(event));
                }
                false
            }
            (Point::After, "CheckpointSaved") => self.ended.contains(&session(event)),
            _ => false,
        }
    }
}

fn session(event: &Value) -> String {
    event["session_id"].as_str().unwrap_or_default().to_owned()
}
