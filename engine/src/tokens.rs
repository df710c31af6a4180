//! Token counting with tiktoken.
//!
//! One tokenizer for the process, loaded lazily; [`warm_up`] loads it on a background thread at
//! start-up so the first turn does not pay for it. Each message is counted once, when it enters
//! the history, and its count is stored with it: budgeting never re-tokenizes old messages.

use crate::message::Message;
use tiktoken_rs::CoreBPE;

/// Text beyond this many bytes is not tokenized but estimated from its length, so a pathological
/// input (a megabyte of base64 in a tool output) cannot stall a turn.
const EXACT_COUNT_LIMIT: usize = 64 * 1024;

/// The tokens a message costs beyond its text (role and framing), as OpenAI documents it.
const PER_MESSAGE_OVERHEAD: u32 = 4;

fn tokenizer() -> &'static CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

/// Loads the tokenizer on a background thread.
pub fn warm_up() {
    std::thread::Builder::new()
        .name("ryvos-tokenizer".into())
        .spawn(|| {
            tokenizer();
        })
        .map(drop)
        .unwrap_or_else(|e| tracing::warn!("could not start the tokenizer warm-up thread: {e}"));
}

/// Waits until the tokenizer is loaded: called off the async workers (`spawn_blocking`) before
/// a run's first count, so that no worker ever blocks on its loading.
pub(crate) fn ready() {
    tokenizer();
}

/// The number of tokens in `text`.
pub fn count_text(text: &str) -> u32 {
    if text.is_empty() {
        return 0;
    }
    if text.len() <= EXACT_COUNT_LIMIT {
        return tokenizer().count_ordinary(text) as u32;
    }
    let mut cut = EXACT_COUNT_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = tokenizer().count_ordinary(&text[..cut]) as u64;
    // Extrapolate the rest at the head's density.
    let estimate = head * text.len() as u64 / cut as u64;
    estimate.min(u32::MAX as u64) as u32
}

/// The tokens `message` occupies in a request.
pub fn count_message(message: &Message) -> u32 {
    PER_MESSAGE_OVERHEAD
        + message
            .text_for_counting()
            .map(count_text)
            .fold(0u32, u32::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_and_caps_huge_text() {
        assert_eq!(count_text(""), 0);
        let n = count_text("hello world");
        assert!((2..=3).contains(&n), "{n}");
        let blob = "QUJD".repeat(256 * 1024); // 1 MiB of base64
        let big = count_text(&blob);
        assert!(big > 100_000, "{big}");
        assert!(count_message(&Message::user("hi")) > PER_MESSAGE_OVERHEAD);
    }
}
