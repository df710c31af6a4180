//! What a run's last request encoded, kept so that its next request encodes only the messages
//! added since. A conversation is sent whole on every call; encoding all of it again each time
//! made a long session's turns slower than a fresh one's, in proportion to everything said
//! before (`cargo bench --bench outside`: the gap per turn of W2 against W1).
//!
//! The prefix is reused only when the new request starts with the very same messages (the
//! same allocations, in order: a weak reference keeps each one's address from being reused),
//! system prompt and tools, for the same provider. A pruned, compacted or transformed
//! conversation, or another model of the chain, is encoded whole again.

use super::replay::ReplayIds;
use super::ToolSpec;
use crate::message::Message;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A run's last encoded request, for its provider to continue from. Opaque outside the
/// providers; a run holds one for its model calls and lets it go when it ends.
#[derive(Default)]
pub struct EncodedPrefix {
    slot: Mutex<Option<Prefix>>,
}

impl std::fmt::Debug for EncodedPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncodedPrefix")
    }
}

/// Which provider encoded a prefix: encodings differ between providers, and a run's fallback
/// models take turns with its primary. Each provider takes one number when it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Encoder(u64);

impl Encoder {
    /// A number no other provider of this process has.
    pub(crate) fn unique() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// One provider's encoding of a conversation's first `messages.len()` messages.
pub(crate) struct Prefix {
    owner: Encoder,
    system: Arc<str>,
    tools: Arc<Vec<ToolSpec>>,
    /// The messages encoded, weakly: holding the conversation's list itself would make the
    /// session copy it on its next append.
    messages: Vec<Weak<Message>>,
    /// The system prompt and the messages as the provider's wire carries them, each one's
    /// encoding after the last (without the enclosing brackets).
    pub(crate) messages_json: Vec<u8>,
    /// The tools as the provider's wire carries them; empty until encoded.
    pub(crate) tools_json: Vec<u8>,
    /// The replay ids given so far, to go on from.
    pub(crate) ids: ReplayIds,
}

/// What a provider needs to know of a request to continue an encoding.
pub(crate) struct Conversation<'a> {
    /// The provider asking.
    pub owner: Encoder,
    pub system: &'a Arc<str>,
    pub tools: &'a Arc<Vec<ToolSpec>>,
    pub messages: &'a [Arc<Message>],
}

impl EncodedPrefix {
    /// The prefix to continue `conversation` from: the one kept, when the conversation
    /// continues it, else an empty one. The caller encodes the rest and calls
    /// [`Self::keep`]; until then, another request of the run starts afresh.
    pub(crate) fn take(&self, conversation: &Conversation<'_>) -> Prefix {
        let kept = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match kept {
            Some(prefix) if prefix.continued_by(conversation) => prefix,
            _ => Prefix {
                owner: conversation.owner,
                system: conversation.system.clone(),
                tools: conversation.tools.clone(),
                messages: Vec::new(),
                messages_json: Vec::new(),
                tools_json: Vec::new(),
                ids: ReplayIds::default(),
            },
        }
    }

    /// Keeps `prefix` for the next request, its encoding now covering all of `messages`.
    pub(crate) fn keep(&self, mut prefix: Prefix, messages: &[Arc<Message>]) {
        let new = &messages[prefix.messages.len()..];
        prefix.messages.extend(new.iter().map(Arc::downgrade));
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(prefix);
    }
}

impl Prefix {
    /// How many of the request's messages are already encoded.
    pub(crate) fn encoded(&self) -> usize {
        self.messages.len()
    }

    /// Whether `c` starts with what this prefix encoded, as the same provider would send it.
    fn continued_by(&self, c: &Conversation<'_>) -> bool {
        self.owner == c.owner
            && Arc::ptr_eq(&self.system, c.system)
            && Arc::ptr_eq(&self.tools, c.tools)
            && self.messages.len() <= c.messages.len()
            && self
                .messages
                .iter()
                .zip(c.messages)
                .all(|(a, b)| std::ptr::eq(a.as_ptr(), Arc::as_ptr(b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        owner: Encoder,
        system: Arc<str>,
        tools: Arc<Vec<ToolSpec>>,
        messages: Vec<Arc<Message>>,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                owner: Encoder::unique(),
                system: "be brief".into(),
                tools: Arc::new(Vec::new()),
                messages: (0..4)
                    .map(|i| Arc::new(Message::user(format!("{i}"))))
                    .collect(),
            }
        }

        fn conversation<'a>(&'a self, messages: &'a [Arc<Message>]) -> Conversation<'a> {
            Conversation {
                owner: self.owner,
                system: &self.system,
                tools: &self.tools,
                messages,
            }
        }

        /// `encoded` after a request of the first `n` messages.
        fn sent(&self, encoded: &EncodedPrefix, n: usize) {
            let prefix = encoded.take(&self.conversation(&self.messages[..n]));
            encoded.keep(prefix, &self.messages[..n]);
        }
    }

    #[test]
    fn the_same_messages_continue_and_others_start_afresh() {
        let f = Fixture::new();
        let encoded = EncodedPrefix::default();
        f.sent(&encoded, 2);
        let all = f.conversation(&f.messages);
        assert_eq!(encoded.take(&all).encoded(), 2, "two more appended");
        f.sent(&encoded, 3);
        let mut rewritten = f.messages.clone();
        rewritten[1] = Arc::new((*rewritten[1]).clone());
        let equal_but_new = f.conversation(&rewritten);
        assert_eq!(encoded.take(&equal_but_new).encoded(), 0);
        f.sent(&encoded, 3);
        assert_eq!(
            encoded.take(&f.conversation(&f.messages[..2])).encoded(),
            0,
            "shorter"
        );
        f.sent(&encoded, 3);
        let other_system: Arc<str> = "be brief".into();
        let mut changed = f.conversation(&f.messages);
        changed.system = &other_system;
        assert_eq!(encoded.take(&changed).encoded(), 0);
        f.sent(&encoded, 3);
        let other = Encoder::unique();
        let mut changed = f.conversation(&f.messages);
        changed.owner = other;
        assert_eq!(encoded.take(&changed).encoded(), 0);
        // Taken and not kept back (the encoding failed): the next request starts afresh.
        assert_eq!(encoded.take(&f.conversation(&f.messages)).encoded(), 0);
    }
}
