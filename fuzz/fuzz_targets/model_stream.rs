//! A model's streamed answer as it comes off the wire: server-sent events, the OpenAI chat,
//! Anthropic or OpenAI Responses decoder (chosen by the first byte modulo 3), and the
//! assembled answer. The first byte's rest chooses where the body is cut into the chunks it
//! arrives in, so lines and characters split across reads are read too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ryvos_actors::testing::{decode_body, WireFormat};

fuzz_target!(|data: &[u8]| {
    let Some((first, body)) = data.split_first() else {
        return;
    };
    let format = match first % 3 {
        0 => WireFormat::OpenAi,
        1 => WireFormat::Anthropic,
        _ => WireFormat::Responses,
    };
    let chunk = usize::from(first / 3) + 1;
    let chunks = body
        .chunks(chunk)
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    let _ = futures_executor::block_on(decode_body(format, chunks));
});
