//! Token sizes: counted exactly with tiktoken's o200k tokenizer where they decide something,
//! bounded from above by the text's bytes where they do not.
//!
//! Building the tokenizer takes a tenth of a second and ~45 MiB, more than the rest of a
//! run, so it is built only when a count is needed: a text's bytes bound its tokens (no token
//! is shorter than a byte), and while a conversation's bound stays under every limit that
//! depends on it (the memory flush, the Guardian's token budget, pruning), no count can change
//! a decision. Once the tokenizer is built, sizes are counted exactly. Each message is sized
//! once, when it enters the history, and its size is kept with it. A tokenizer nobody used for
//! [`IDLE_RELEASE`] is let go, and its memory given back: see [`release_when_idle`].

use crate::heartbeat::Heartbeat;
use crate::message::Message;
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tiktoken_rs::CoreBPE;

/// Text beyond this many bytes is not tokenized but estimated from its length, so a pathological
/// input (a megabyte of base64 in a tool output) cannot stall a turn.
const EXACT_COUNT_LIMIT: usize = 64 * 1024;

/// The tokens a message costs beyond its text (role and framing), as OpenAI documents it.
const PER_MESSAGE_OVERHEAD: u32 = 4;

/// A tokenizer unused this long is let go (a daemon between bursts of work).
pub(crate) const IDLE_RELEASE: Duration = Duration::from_secs(300);
/// How often a daemon looks whether the tokenizer is idle.
const IDLE_CHECK: Duration = Duration::from_secs(60);

static TOKENIZER: LazyLock<Held<CoreBPE>> = LazyLock::new(Held::new);

/// Whether a thread building the tokenizer was started.
static WARMING: AtomicBool = AtomicBool::new(false);

/// A value built on demand and let go when unused: reading whether it is there never waits,
/// and it is built once however many ask for it at once.
pub(crate) struct Held<T> {
    value: ArcSwapOption<T>,
    building: Mutex<()>,
    /// Beats whenever the value is handed out.
    used: Heartbeat,
}

impl<T> Held<T> {
    pub(crate) fn new() -> Self {
        Self {
            value: ArcSwapOption::const_empty(),
            building: Mutex::new(()),
            used: Heartbeat::new(),
        }
    }

    /// Whether the value is there now.
    pub(crate) fn is_held(&self) -> bool {
        self.value.load().is_some()
    }

    /// The value, built by `build` if it is not there.
    pub(crate) fn get(&self, build: impl FnOnce() -> T) -> Arc<T> {
        self.used.beat();
        if let Some(value) = self.value.load_full() {
            return value;
        }
        let _building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(value) = self.value.load_full() {
            return value;
        }
        let value = Arc::new(build());
        self.value.store(Some(value.clone()));
        value
    }

    /// Lets the value go if nobody asked for it for `idle`; true if it was let go.
    pub(crate) fn release_if_idle(&self, idle: Duration) -> bool {
        let _building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        if self.used.silent_for() < idle {
            return false;
        }
        self.value.swap(None).is_some()
    }
}

/// A size in tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Size {
    /// Counted with the tokenizer.
    Counted(u32),
    /// Not counted: at most this many.
    AtMost(u32),
}

impl Size {
    /// The count, or the bound.
    pub(crate) fn tokens(self) -> u32 {
        match self {
            Size::Counted(n) | Size::AtMost(n) => n,
        }
    }

    /// The count, if counted.
    pub(crate) fn counted(self) -> Option<u32> {
        match self {
            Size::Counted(n) => Some(n),
            Size::AtMost(_) => None,
        }
    }
}

fn tokenizer() -> Arc<CoreBPE> {
    TOKENIZER.get(|| {
        tiktoken_rs::o200k_base().expect("the o200k tokenizer's tables are built into tiktoken-rs")
    })
}

/// Whether the tokenizer is built, so that counting costs only the counting.
pub(crate) fn loaded() -> bool {
    TOKENIZER.is_held()
}

/// Lets the tokenizer go once it has been unused for [`IDLE_RELEASE`], looking every
/// [`IDLE_CHECK`] until `stopped`. Sessions that counted go back to bounds for what comes next,
/// and count again (building it anew) only near a limit.
pub(crate) async fn release_when_idle(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(IDLE_CHECK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopped.wait_for(|stopped| *stopped) => return,
        }
        if TOKENIZER.release_if_idle(IDLE_RELEASE) {
            WARMING.store(false, Ordering::Relaxed);
            give_back_freed_memory();
            tracing::debug!("the tokenizer was unused for {IDLE_RELEASE:?} and was let go");
        }
    }
}

/// Returns the allocator's free pages to the system: the tokenizer's tables are hundreds of
/// thousands of small allocations, which `free` alone keeps in the heap.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether this process built the tokenizer, or began to (for the tests of its cost).
#[cfg(feature = "testing")]
pub fn asked_for() -> bool {
    loaded() || WARMING.load(Ordering::Relaxed)
}

/// Builds the tokenizer on a background thread, once, if it is not built yet.
pub fn warm_up() {
    if loaded() || WARMING.swap(true, Ordering::Relaxed) {
        return;
    }
    std::thread::Builder::new()
        .name("ryvos-tokenizer".into())
        .spawn(|| drop(tokenizer()))
        .map(drop)
        .unwrap_or_else(|e| tracing::warn!("could not start the tokenizer warm-up thread: {e}"));
}

/// Runs `count` (which may build the tokenizer and count much text) where blocking is fine: on
/// a multi-threaded runtime's worker, the worker first hands its other tasks to the others.
pub(crate) fn blocking<T>(count: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(count)
        }
        _ => count(),
    }
}

/// The tokenizer, built if it is not built yet (see [`blocking`]).
fn ready() -> Arc<CoreBPE> {
    match loaded() {
        true => tokenizer(),
        false => blocking(tokenizer),
    }
}

/// The number of tokens in `text`, counted (building the tokenizer if it must).
pub fn count_text(text: &str) -> u32 {
    if text.is_empty() {
        return 0;
    }
    let tokenizer = ready();
    if text.len() <= EXACT_COUNT_LIMIT {
        return tokenizer.count_ordinary(text) as u32;
    }
    let mut cut = EXACT_COUNT_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = tokenizer.count_ordinary(&text[..cut]) as u64;
    // Extrapolate the rest at the head's density.
    let estimate = head * text.len() as u64 / cut as u64;
    estimate.min(u32::MAX as u64) as u32
}

/// The tokens `message` occupies in a request, counted (building the tokenizer if it must).
pub fn count_message(message: &Message) -> u32 {
    PER_MESSAGE_OVERHEAD
        + message
            .text_for_counting()
            .map(count_text)
            .fold(0u32, u32::saturating_add)
}

/// `text`'s size: counted when the tokenizer is built, else bounded by its bytes.
pub(crate) fn size_text(text: &str) -> Size {
    if loaded() {
        return Size::Counted(count_text(text));
    }
    Size::AtMost(bytes(text))
}

/// `message`'s size in a request: counted when the tokenizer is built, else bounded by its
/// bytes.
pub(crate) fn size_message(message: &Message) -> Size {
    if loaded() {
        return Size::Counted(count_message(message));
    }
    bound_message(message)
}

/// `message`'s size bounded by its bytes, whether or not the tokenizer is built.
pub(crate) fn bound_message(message: &Message) -> Size {
    let text = message
        .text_for_counting()
        .map(bytes)
        .fold(0u32, u32::saturating_add);
    Size::AtMost(PER_MESSAGE_OVERHEAD.saturating_add(text))
}

fn bytes(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_value_is_built_once_and_let_go_only_when_idle() {
        let held: Held<String> = Held::new();
        assert!(!held.is_held());
        assert_eq!(*held.get(|| "built".into()), "built");
        assert_eq!(*held.get(|| unreachable!("built once")), "built");
        assert!(
            !held.release_if_idle(Duration::from_secs(3600)),
            "just used"
        );
        assert!(held.is_held());
        assert!(held.release_if_idle(Duration::ZERO));
        assert!(!held.is_held());
        assert!(
            !held.release_if_idle(Duration::ZERO),
            "nothing left to let go"
        );
        assert_eq!(*held.get(|| "again".into()), "again");
    }

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

    #[test]
    fn a_bound_is_never_below_the_count() {
        for text in ["", "hello world", "ünïcödé ✓ 漢字", &"x".repeat(10_000)] {
            let bound = u32::try_from(text.len()).unwrap();
            assert!(count_text(text) <= bound, "{text}");
        }
        let message = Message::user("a bound holds for a message too");
        assert!(count_message(&message) <= PER_MESSAGE_OVERHEAD + 31);
        // Built (by the counts above), sizes are counts.
        assert_eq!(
            size_message(&message),
            Size::Counted(count_message(&message))
        );
    }
}
