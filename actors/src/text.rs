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

#[cfg(test)]
mod tests {
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
