//! Test hooks, built only with the `testing` feature: the engine's own, and what reaches
//! through a [`Runtime`] to its engine and store.

use crate::Runtime;
pub use ryvos_actors::testing::*;
pub use ryvos_actors::{Engine, Store};

/// Reaches through a runtime for tests.
pub trait Inspect {
    /// The engine: panics on purpose, supervision notices.
    fn engine(&self) -> &Engine;
    /// The store, to check what a run left there.
    fn store(&self) -> &Store;
}

impl Inspect for Runtime {
    fn engine(&self) -> &Engine {
        &self.engine
    }

    fn store(&self) -> &Store {
        self.engine.store()
    }
}
