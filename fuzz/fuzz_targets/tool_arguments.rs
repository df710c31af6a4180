//! Tool-argument validation: the model's arguments for a built-in tool (chosen by the first
//! byte) parsed and checked against its JSON Schema.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ryvos_actors::testing::{builtin, ToolRegistry};
use std::sync::OnceLock;

fn registry() -> &'static ToolRegistry {
    static REGISTRY: OnceLock<ToolRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| ToolRegistry::new(builtin::all()).expect("the built-in tools"))
}

fuzz_target!(|data: &[u8]| {
    let Some((first, arguments)) = data.split_first() else {
        return;
    };
    let names = registry().names();
    let name = names[usize::from(*first) % names.len()];
    if let Ok(arguments) = std::str::from_utf8(arguments) {
        let _ = registry().validate(name, arguments);
    }
});
