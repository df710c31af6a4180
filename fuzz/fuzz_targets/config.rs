//! The config parser: any text is a config or an error naming what is wrong, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ryvos::Config::parse(text, std::path::Path::new("fuzz.toml"));
    }
});
