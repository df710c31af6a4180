//! The socket's frame decoder, as the daemon reads a connection: bytes split into lines of at
//! most MAX_FRAME_BYTES, each line read as a request and its method's parameters.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ryvos::protocol::{Request, MAX_FRAME_BYTES};
use tokio_util::codec::{Decoder, LinesCodec};

fuzz_target!(|data: &[u8]| {
    let mut codec = LinesCodec::new_with_max_length(MAX_FRAME_BYTES);
    let mut buffer = BytesMut::from(data);
    while let Ok(Some(line)) = codec.decode(&mut buffer) {
        if let Ok(request) = Request::decode(&line) {
            let _ = request.method();
        }
    }
    if let Ok(Some(line)) = codec.decode_eof(&mut buffer) {
        if let Ok(request) = Request::decode(&line) {
            let _ = request.method();
        }
    }
});
