//! What the end-to-end tests share: a runtime against a scripted model server, in temp dirs.

#![allow(dead_code)]

pub mod backend;
pub mod browser;
pub mod budget;
pub mod cli;
pub mod confined;
pub mod console;
pub mod home;
pub mod mcp;
pub mod python;
pub mod terminal;
pub mod unprivileged;

use ryvos::config::Decision;
use ryvos::provider::{ChatRequest, DeltaStream, Provider, ProviderError};
use ryvos::{Config, Event, EventKind, RunHandle, RunOutcome, RunRequest, Runtime};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::sync::Arc;
use std::time::Duration;

/// A `bash` call writing `proof.txt` (the default policy asks about it), then the answer
/// `Done.`: a run that shows whether, and when, its call was approved.
pub fn bash_proof_then_done() -> [Reply; 2] {
    [
        Reply::tool_calls(&[("b1", "bash", r#"{"command": "echo approved > proof.txt"}"#)]),
        Reply::text(&["Done."]),
    ]
}

/// The longest any test waits for a run; a run that takes longer is a hang, and fails the test.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A runtime, its model server, and its directories.
pub struct Harness {
    pub server: ScriptedModelServer,
    pub runtime: Runtime,
    pub config: Config,
    pub home: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
}

/// Settings pointing at `server`, with Ryvos's home in `home`, fast restarts for tests.
pub fn config_for(server: &ScriptedModelServer, home: &std::path::Path) -> Config {
    let mut config = Config::with_home(home);
    config.model.base_url = server.base_url();
    // Used only by tests that turn embeddings on.
    config.embedding.base_url = server.base_url();
    config.model.api_key = String::new();
    config.model.model = "scripted".into();
    config.supervision.backoff_initial_ms = 20;
    config.supervision.backoff_max_ms = 200;
    // Retries stay on, with short backoffs (a server's Retry-After is still honoured).
    config.model.retry_base_ms = 5;
    // Tools run without asking (T4 is still denied); the security tests set their own policy.
    let policy = &mut config.security.policy;
    (policy.t1, policy.t2, policy.t3) = (Decision::Allow, Decision::Allow, Decision::Allow);
    config
}

/// A host application's provider: it passes every call on to `self.0`, and keeps the default
/// [`Provider::runs_locally`] (false) that any provider of its own has.
struct HostedProvider(Arc<dyn Provider>);

#[async_trait::async_trait]
impl Provider for HostedProvider {
    fn model(&self) -> &str {
        self.0.model()
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        self.0.stream(request).await
    }
}

impl Harness {
    /// A runtime answering from `script`, with `tweak` applied to its settings.
    pub async fn start(script: Vec<Reply>, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start_with(script, tweak, |b| b).await
    }

    /// As [`Harness::start`], with extra setup of the builder (custom tools).
    pub async fn start_with(
        script: Vec<Reply>,
        tweak: impl FnOnce(&mut Config),
        build: impl FnOnce(ryvos::RuntimeBuilder) -> ryvos::RuntimeBuilder,
    ) -> Self {
        Self::start_on(ScriptedModelServer::start(script).await, tweak, build).await
    }

    /// As [`Harness::start`], with requests `router` answers taken out of the script's order.
    pub async fn start_routed(
        script: Vec<Reply>,
        router: ryvos_testkit::Router,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let server = ScriptedModelServer::start_routed(script, Some(router)).await;
        Self::start_on(server, tweak, |b| b).await
    }

    /// As [`Harness::start`], with the model reached through a provider the host application
    /// brings, as an embedder's own client to a remote service would be: not on this machine,
    /// so its model is not free.
    pub async fn start_hosted(script: Vec<Reply>, tweak: impl FnOnce(&mut Config)) -> Self {
        let server = ScriptedModelServer::start(script).await;
        let model = config_for(&server, std::path::Path::new(".")).model;
        let client = ryvos::provider::from_config(&model).expect("a provider");
        let hosted: Arc<dyn Provider> = Arc::new(HostedProvider(client));
        Self::start_on(server, tweak, move |b| b.provider(hosted)).await
    }

    async fn start_on(
        server: ScriptedModelServer,
        tweak: impl FnOnce(&mut Config),
        build: impl FnOnce(ryvos::RuntimeBuilder) -> ryvos::RuntimeBuilder,
    ) -> Self {
        let home = tempfile::tempdir().expect("temp home");
        let workspace = tempfile::tempdir().expect("temp workspace");
        let mut config = config_for(&server, home.path());
        tweak(&mut config);
        let runtime = build(Runtime::builder(config.clone()))
            .start()
            .await
            .expect("runtime starts");
        Self {
            server,
            runtime,
            config,
            home,
            workspace,
        }
    }

    /// A request for `prompt` in this harness's workspace.
    pub fn request(&self, prompt: &str) -> RunRequest {
        RunRequest::new(prompt).workspace(self.workspace.path())
    }

    /// Runs `request` to its end; returns every event and the outcome.
    pub async fn run(&self, request: RunRequest) -> (Vec<Arc<Event>>, RunOutcome) {
        run_on(&self.runtime, request).await
    }

    /// Stops the runtime and starts a new one on the same home (a restart of the process).
    pub async fn restart(self) -> Self {
        self.restart_with(|_| {}).await
    }

    /// As [`Harness::restart`], with `tweak` applied to the settings first.
    pub async fn restart_with(self, tweak: impl FnOnce(&mut Config)) -> Self {
        let Harness {
            server,
            runtime,
            mut config,
            home,
            workspace,
        } = self;
        tweak(&mut config);
        runtime.close().await.expect("clean shutdown");
        let runtime = Runtime::start(config.clone())
            .await
            .expect("runtime restarts");
        Harness {
            server,
            runtime,
            config,
            home,
            workspace,
        }
    }
}

/// Runs `request` on `runtime` to its end, failing the test if it takes longer than
/// [`RUN_TIMEOUT`].
pub async fn run_on(runtime: &Runtime, request: RunRequest) -> (Vec<Arc<Event>>, RunOutcome) {
    collect(runtime.run(request).await.expect("run accepted")).await
}

/// Follows a run to its end; returns every event and the outcome. Fails the test if the run
/// takes longer than [`RUN_TIMEOUT`].
pub async fn collect(mut handle: RunHandle) -> (Vec<Arc<Event>>, RunOutcome) {
    let collect = async {
        let mut events = Vec::new();
        while let Some(event) = handle.next_event().await {
            events.push(event);
        }
        events
    };
    let events = tokio::time::timeout(RUN_TIMEOUT, collect)
        .await
        .expect("the run ended in time");
    let outcome = events
        .last()
        .and_then(|e| RunOutcome::from_event(e))
        .expect("the last event is RunComplete");
    (events, outcome)
}

/// The text of every `TextDelta`, in order.
pub fn deltas(events: &[Arc<Event>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// The `tool` messages of a captured request: (tool_call_id, content).
pub fn tool_results(request: &serde_json::Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A number from the environment variable `name`, else `default`: for the long-running
/// harnesses' sizes and seeds.
pub fn env_setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// In a captured request: the model's answers since the last prompt.
pub fn answers_since_prompt(request: &serde_json::Value) -> usize {
    request["messages"].as_array().map_or(0, |messages| {
        messages
            .iter()
            .rev()
            .take_while(|m| m["role"] != "user")
            .filter(|m| m["role"] == "assistant")
            .count()
    })
}

/// The user message of a captured request (its last one).
pub fn asked(request: &serde_json::Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Whether a captured request is the Judge's.
pub fn is_judge(request: &serde_json::Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You are the Judge"))
}
