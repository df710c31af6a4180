//! Terms: how text is cut into the words the keyword index counts.
//!
//! Lowercased runs of letters and digits, two characters or more, without the commonest
//! English words (which say nothing about what a memory is about).

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "he",
    "in", "is", "it", "its", "of", "on", "or", "she", "that", "the", "their", "them", "they",
    "this", "to", "was", "we", "were", "what", "when", "which", "who", "will", "with", "you",
];

/// The terms of `text`, in order, repeats kept.
pub(super) fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect()
}

/// The terms a memory is found by: its content's and its tags'.
pub(super) fn indexed_terms(entry: &ryvos_protocol::records::MemoryEntry) -> Vec<String> {
    let mut all = terms(&entry.content);
    for tag in &entry.tags {
        all.extend(terms(tag));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercased_and_stopwords_dropped() {
        assert_eq!(
            terms("The Deploy key is in vault-7, NOT the repo!"),
            ["deploy", "key", "vault", "not", "repo"]
        );
    }
}
