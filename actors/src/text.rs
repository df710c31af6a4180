//! Small text helpers shared by the modules that quote text back to people or models.

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut (the
/// mark counted in `max`, where it fits).
pub(crate) fn truncate(text: &str, max: usize) -> String {
    const MARK: &str = "…";
    if text.len() <= max {
        return text.to_owned();
    }
    let room = max.checked_sub(MARK.len());
    let mut cut = room.unwrap_or(max);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    match room {
        Some(_) => format!("{}{MARK}", &text[..cut]),
        None => text[..cut].to_owned(),
    }
}

/// `text` cut to about `max` bytes by taking out its middle: a quarter of it from the start,
/// the rest from the end, where a server's error often says what went wrong after quoting what
/// it choked on.
pub(crate) fn clip_middle(text: &str, max: usize) -> String {
    const MARK: &str = " […] ";
    if text.len() <= max || max <= MARK.len() {
        return truncate(text, max);
    }
    let mut head = (max - MARK.len()) / 4;
    let mut tail = text.len() - (max - MARK.len() - head);
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}{MARK}{}", &text[..head], &text[tail..])
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_text_keeps_its_head_and_its_end() {
        let text = format!("start {} the words at the end", "x".repeat(1000));
        let clipped = super::clip_middle(&text, 200);
        assert!(clipped.len() <= 200, "{}", clipped.len());
        assert!(clipped.starts_with("start ") && clipped.ends_with("the words at the end"));
        assert_eq!(super::clip_middle("short", 200), "short");
    }

    #[test]
    fn cuts_on_a_character_boundary_within_the_limit() {
        assert_eq!(super::truncate("héllo", 5), "h…");
        assert_eq!(super::truncate("héllo wörld", 7), "hél…");
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("short", 10), "short");
        let long = "x".repeat(200);
        assert_eq!(super::truncate(&long, 80).len(), 80);
    }
}
