//! RootSupervisor: the top of the actor tree.
//!
//! It starts the CheckpointActor, the CostLedgerActor, the GuardianActor, the LlmStreamActor,
//! the ToolExecutorActor, the JudgeActor and the SessionSupervisor, restarts any of them that fails (exponential backoff with jitter; each
//! restarted actor rebuilds its state from its arguments and the store), and escalates when one
//! fails more than `max_restarts` times within the window: it stops, and the runtime reports
//! that it is down. Siblings reach a restarted child through its [`ChildSlot`].

use crate::checkpoint::{Checkpoint, CheckpointActor, CheckpointMsg};
use crate::cost_ledger::{CostLedgerActor, CostLedgerArgs, CostLedgerMsg};
use crate::guardian::{GuardianActor, GuardianArgs, GuardianMsg};
use crate::judge::{JudgeActor, JudgeArgs, JudgeMsg};
use crate::llm_stream::{LlmMsg, LlmStreamActor};
use crate::mcp::{McpHub, McpHubArgs, McpMsg};
use crate::session::{SessionSupervisor, SessionSupervisorArgs, SessionSupervisorMsg};
use crate::store::StoreError;
use crate::supervision::{ChildSlot, RestartDecision, RestartHistory, RestartPolicy};
use crate::tool_executor::{ToolExecutorActor, ToolExecutorArgs, ToolMsg};
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SpawnErr,
    SupervisionEvent,
};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// The children of the root, in start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChildKind {
    Checkpoint,
    CostLedger,
    Guardian,
    LlmStream,
    ToolExecutor,
    Judge,
    Mcp,
    Sessions,
}

impl ChildKind {
    const ALL: [ChildKind; 8] = [
        ChildKind::Checkpoint,
        ChildKind::CostLedger,
        ChildKind::Guardian,
        ChildKind::LlmStream,
        ChildKind::ToolExecutor,
        ChildKind::Judge,
        ChildKind::Mcp,
        ChildKind::Sessions,
    ];
}

/// What the root did about a failed child; published for logs, operators and tests.
#[derive(Clone, Debug, PartialEq)]
pub enum SupervisorNotice {
    /// `child` failed and will be restarted after `after`.
    Restarting {
        child: ChildKind,
        attempt: u32,
        after: Duration,
        why: String,
    },
    /// `child` is running again.
    Restarted { child: ChildKind },
    /// `child` failed too often; the root stopped.
    GaveUp { child: ChildKind, why: String },
}

/// Messages of the [`RootSupervisor`].
pub(crate) enum RootMsg {
    /// Restart a failed child (sent to itself after the backoff).
    Restart(ChildKind),
    /// Stop gracefully: end the runs in flight, commit what they wrote, stop every child.
    Shutdown(RpcReplyPort<Result<(), StoreError>>),
    /// Test hook: make a child panic.
    #[cfg(feature = "testing")]
    Panic(ChildKind),
}

type SpawnFuture = Pin<Box<dyn Future<Output = Result<ActorCell, SpawnErr>> + Send>>;
type Spawner = Arc<dyn Fn(ActorCell) -> SpawnFuture + Send + Sync>;

/// How to (re)start one child: spawn it linked to the root and put it in its slot.
fn spawner<A>(actor: fn() -> A, args: A::Arguments, slot: ChildSlot<A::Msg>) -> Spawner
where
    A: Actor,
    A::Arguments: Clone + Sync,
{
    Arc::new(move |root: ActorCell| {
        let args = args.clone();
        let slot = slot.clone();
        Box::pin(async move {
            let (child, _) = Actor::spawn_linked(None, actor(), args, root).await?;
            slot.set(child.clone());
            Ok(child.get_cell())
        })
    })
}

/// Everything the root starts its children with.
pub(crate) struct RootArgs {
    /// The way to the store's writer, which the checkpoint actor owns.
    pub checkpoint: Checkpoint,
    pub ledger: CostLedgerArgs,
    pub guardian: GuardianArgs,
    pub tools: ToolExecutorArgs,
    pub judge: JudgeArgs,
    pub mcp: McpHubArgs,
    pub sessions: SessionSupervisorArgs,
    pub policy: RestartPolicy,
    pub slots: Slots,
    pub notices: broadcast::Sender<SupervisorNotice>,
}

/// The stable addresses of the root's children.
#[derive(Clone)]
pub(crate) struct Slots {
    pub checkpoint: ChildSlot<CheckpointMsg>,
    pub ledger: ChildSlot<CostLedgerMsg>,
    pub guardian: ChildSlot<GuardianMsg>,
    pub llm: ChildSlot<LlmMsg>,
    pub tools: ChildSlot<ToolMsg>,
    pub judge: ChildSlot<JudgeMsg>,
    pub mcp: ChildSlot<McpMsg>,
    pub sessions: ChildSlot<SessionSupervisorMsg>,
}

impl Slots {
    /// Empty slots, filled as the children start.
    pub(crate) fn new() -> Self {
        Self {
            checkpoint: ChildSlot::new("checkpoint"),
            ledger: ChildSlot::new("cost ledger"),
            guardian: ChildSlot::new("Guardian"),
            llm: ChildSlot::new("LLM stream"),
            tools: ChildSlot::new("tool executor"),
            judge: ChildSlot::new("Judge"),
            mcp: ChildSlot::new("MCP hub"),
            sessions: ChildSlot::new("session supervisor"),
        }
    }

    fn is_filled(&self, kind: ChildKind) -> bool {
        match kind {
            ChildKind::Checkpoint => self.checkpoint.is_filled(),
            ChildKind::CostLedger => self.ledger.is_filled(),
            ChildKind::Guardian => self.guardian.is_filled(),
            ChildKind::LlmStream => self.llm.is_filled(),
            ChildKind::ToolExecutor => self.tools.is_filled(),
            ChildKind::Judge => self.judge.is_filled(),
            ChildKind::Mcp => self.mcp.is_filled(),
            ChildKind::Sessions => self.sessions.is_filled(),
        }
    }

    fn close(&self, kind: ChildKind) {
        match kind {
            ChildKind::Checkpoint => self.checkpoint.close(),
            ChildKind::CostLedger => self.ledger.close(),
            ChildKind::Guardian => self.guardian.close(),
            ChildKind::LlmStream => self.llm.close(),
            ChildKind::ToolExecutor => self.tools.close(),
            ChildKind::Judge => self.judge.close(),
            ChildKind::Mcp => self.mcp.close(),
            ChildKind::Sessions => self.sessions.close(),
        }
    }

    fn clear(&self, kind: ChildKind) {
        match kind {
            ChildKind::Checkpoint => self.checkpoint.clear(),
            ChildKind::CostLedger => self.ledger.clear(),
            ChildKind::Guardian => self.guardian.clear(),
            ChildKind::LlmStream => self.llm.clear(),
            ChildKind::ToolExecutor => self.tools.clear(),
            ChildKind::Judge => self.judge.clear(),
            ChildKind::Mcp => self.mcp.clear(),
            ChildKind::Sessions => self.sessions.clear(),
        }
    }
}

impl Default for Slots {
    fn default() -> Self {
        Self::new()
    }
}

/// The actor; see the module documentation.
pub(crate) struct RootSupervisor;

/// Its state.
pub(crate) struct RootState {
    spawners: HashMap<ChildKind, Spawner>,
    children: HashMap<ActorId, ChildKind>,
    restarts: HashMap<ChildKind, RestartHistory>,
    policy: RestartPolicy,
    slots: Slots,
    checkpoint: Checkpoint,
    notices: broadcast::Sender<SupervisorNotice>,
    shutting_down: bool,
}

/// How long shutdown waits for each of its steps.
const SHUTDOWN_STEP_TIMEOUT: Duration = Duration::from_secs(35);

impl Actor for RootSupervisor {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = RootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RootArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let slots = args.slots;
        let mut spawners: HashMap<ChildKind, Spawner> = HashMap::new();
        spawners.insert(
            ChildKind::Checkpoint,
            spawner(
                || CheckpointActor,
                args.checkpoint.writer(),
                slots.checkpoint.clone(),
            ),
        );
        spawners.insert(
            ChildKind::CostLedger,
            spawner(|| CostLedgerActor, args.ledger, slots.ledger.clone()),
        );
        spawners.insert(
            ChildKind::Guardian,
            spawner(|| GuardianActor, args.guardian, slots.guardian.clone()),
        );
        spawners.insert(
            ChildKind::LlmStream,
            spawner(LlmStreamActor::new, (), slots.llm.clone()),
        );
        spawners.insert(
            ChildKind::ToolExecutor,
            spawner(ToolExecutorActor::new, args.tools, slots.tools.clone()),
        );
        spawners.insert(
            ChildKind::Judge,
            spawner(JudgeActor::new, args.judge, slots.judge.clone()),
        );
        spawners.insert(
            ChildKind::Mcp,
            spawner(|| McpHub, args.mcp, slots.mcp.clone()),
        );
        spawners.insert(
            ChildKind::Sessions,
            spawner(|| SessionSupervisor, args.sessions, slots.sessions.clone()),
        );
        let mut state = RootState {
            spawners,
            children: HashMap::new(),
            restarts: HashMap::new(),
            policy: args.policy,
            slots,
            checkpoint: args.checkpoint,
            notices: args.notices,
            shutting_down: false,
        };
        for kind in ChildKind::ALL {
            state.spawn(&myself, kind).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RootMsg::Restart(kind) => {
                if !state.shutting_down {
                    match state.spawn(&myself, kind).await {
                        Ok(()) => {
                            tracing::info!(?kind, "restarted");
                            state.notify(SupervisorNotice::Restarted { child: kind });
                        }
                        Err(e) => {
                            // A failed start counts as a failure of the child.
                            tracing::error!(?kind, "restart failed: {e}");
                            state.on_child_down(&myself, kind, e.to_string())?;
                        }
                    }
                }
            }
            RootMsg::Shutdown(reply) => {
                state.shutting_down = true;
                let result = state.shut_down().await;
                myself
                    .stop_children_and_wait(Some("shutdown".into()), Some(SHUTDOWN_STEP_TIMEOUT))
                    .await;
                if reply.send(result).is_err() {
                    tracing::debug!("the shutdown's caller left");
                }
                myself.stop(Some("shutdown".into()));
            }
            #[cfg(feature = "testing")]
            RootMsg::Panic(kind) => state.inject_panic(kind),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match event {
            SupervisionEvent::ActorFailed(cell, e) => (cell, format!("it panicked: {e}")),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "it stopped".into()))
            }
            _ => return Ok(()),
        };
        let Some(kind) = state.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        if state.shutting_down {
            return Ok(());
        }
        state.on_child_down(&myself, kind, why)
    }
}

impl RootState {
    async fn spawn(
        &mut self,
        myself: &ActorRef<RootMsg>,
        kind: ChildKind,
    ) -> Result<(), ActorProcessingErr> {
        let spawn = self.spawners[&kind].clone();
        let cell = spawn(myself.get_cell()).await?;
        self.children.insert(cell.get_id(), kind);
        Ok(())
    }

    /// Schedules a restart with backoff, or escalates by failing the root.
    fn on_child_down(
        &mut self,
        myself: &ActorRef<RootMsg>,
        kind: ChildKind,
        why: String,
    ) -> Result<(), ActorProcessingErr> {
        self.slots.clear(kind);
        let decision = self
            .restarts
            .entry(kind)
            .or_default()
            .on_failure(&self.policy, Instant::now());
        match decision {
            RestartDecision::Restart { after, attempt } => {
                tracing::warn!(
                    ?kind,
                    attempt,
                    "child failed ({why}); restarting in {after:?}"
                );
                myself.send_after(after, move || RootMsg::Restart(kind));
                self.notify(SupervisorNotice::Restarting {
                    child: kind,
                    attempt,
                    after,
                    why,
                });
                Ok(())
            }
            RestartDecision::GiveUp { restarts_in_window } => {
                let why = format!(
                    "the {kind:?} actor failed {} times within {:?} (last: {why}); the runtime \
                     stopped rather than keep restarting it",
                    restarts_in_window + 1,
                    self.policy.window
                );
                tracing::error!("{why}");
                self.notify(SupervisorNotice::GaveUp {
                    child: kind,
                    why: why.clone(),
                });
                // Nothing comes back: messages waiting for a restart are dropped now.
                for kind in ChildKind::ALL {
                    self.slots.close(kind);
                }
                Err(why.into())
            }
        }
    }

    fn notify(&self, notice: SupervisorNotice) {
        // Nobody listening is normal; the notice is also in the log.
        self.notices.send(notice).ok();
    }

    /// Ends the runs in flight, waits for their last commits, and stops the children.
    async fn shut_down(&mut self) -> Result<(), StoreError> {
        // A child down now is not restarted during the shutdown: work waiting for it is
        // dropped (and reported) at once rather than at the end of its patience.
        for kind in ChildKind::ALL {
            if !self.slots.is_filled(kind) {
                self.slots.close(kind);
            }
        }
        let sessions = crate::session::Sessions::new(self.slots.sessions.clone());
        let stopped = sessions
            .stop_all("the runtime is shutting down", SHUTDOWN_STEP_TIMEOUT)
            .await;
        if let Err(e) = stopped {
            tracing::warn!("stopping the sessions: {e}");
        }
        let flushed = crate::checkpoint::flush(&self.checkpoint).await;
        for kind in ChildKind::ALL.iter().rev() {
            self.slots.close(*kind);
        }
        flushed
    }

    #[cfg(feature = "testing")]
    fn inject_panic(&self, kind: ChildKind) {
        let sent = match kind {
            ChildKind::Checkpoint => self.slots.checkpoint.cast(CheckpointMsg::Panic),
            ChildKind::CostLedger => self.slots.ledger.cast(CostLedgerMsg::Panic),
            ChildKind::Guardian => self.slots.guardian.cast(GuardianMsg::Panic),
            ChildKind::LlmStream => self.slots.llm.cast(crate::supervision::JobMsg::Panic),
            ChildKind::ToolExecutor => self.slots.tools.cast(crate::supervision::JobMsg::Panic),
            ChildKind::Judge => self.slots.judge.cast(crate::supervision::JobMsg::Panic),
            ChildKind::Mcp => Err(crate::supervision::Unavailable(
                "MCP hub (kill a server's process instead)",
            )),
            ChildKind::Sessions => Err(crate::supervision::Unavailable(
                "session supervisor (inject into a session instead)",
            )),
        };
        if let Err(e) = sent {
            tracing::warn!("fault injection: {e}");
        }
    }
}
