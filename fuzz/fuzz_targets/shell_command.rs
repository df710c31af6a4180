//! The security gate's reader of bash commands: any command line is read or refused (and a
//! refused one is classified T4), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(command) = std::str::from_utf8(data) {
        let _ = ryvos_actors::testing::parse_shell(command);
    }
});
