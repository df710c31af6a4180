//! A model's streamed answer as it comes off the wire: server-sent events, the OpenAI or the
//! Anthropic decoder (chosen by the first byte), and the assembled answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ryvos_actors::provider::sse::{decode_body, WireFormat};

fuzz_target!(|data: &[u8]| {
    let Some((first, body)) = data.split_first() else {
        return;
    };
    let format = if first % 2 == 0 {
        WireFormat::OpenAi
    } else {
        WireFormat::Anthropic
    };
    let body = bytes::Bytes::copy_from_slice(body);
    let _ = futures_executor::block_on(decode_body(format, body));
});
