//! Small text helpers shared by the modules that quote text back to people or models.

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    #[test]
    fn cuts_on_a_character_boundary() {
        assert_eq!(super::truncate("héllo", 2), "h…");
        assert_eq!(super::truncate("short", 10), "short");
    }
}
