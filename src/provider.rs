//! What a model provider implements, for a host application that brings its own model
//! (see [`crate::RuntimeBuilder::provider`]).

pub use ryvos_actors::probe_provider as probe;
pub use ryvos_actors::provider_from_config as from_config;
pub use ryvos_actors::provider_keys_set as keys_set;
pub use ryvos_actors::{
    ChatRequest, DeltaStream, FinishReason, Provider, ProviderError, StreamDelta, ToolSpec, Usage,
};
