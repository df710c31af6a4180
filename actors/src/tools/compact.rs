//! Keeping long tool outputs from flooding the context.

/// Cuts `output` to at most `max_bytes`, keeping the head (usually the most relevant part, and
/// where errors start), at a line boundary when one is near, and says what was cut.
pub(crate) fn compact_output(output: String, max_bytes: usize) -> String {
    if output.len() <= max_bytes {
        return output;
    }
    let mut cut = max_bytes;
    while !output.is_char_boundary(cut) {
        cut -= 1;
    }
    if let Some(newline) = output[..cut].rfind('\n') {
        if newline >= cut - cut / 5 {
            cut = newline;
        }
    }
    let total_lines = output.lines().count();
    let kept_lines = output[..cut].lines().count();
    format!(
        "{}\n[output truncated: showing the first {} of {} bytes ({} of {} lines). Narrow the \
         request (an offset and limit, a more specific pattern or command) to see the rest.]",
        &output[..cut],
        cut,
        output.len(),
        kept_lines,
        total_lines
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_untouched_and_long_output_keeps_its_head() {
        assert_eq!(compact_output("abc".into(), 10), "abc");
        let long: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let c = compact_output(long.clone(), 100);
        assert!(c.starts_with("line 0\nline 1\n"));
        assert!(c.contains("[output truncated: showing the first"));
        assert!(c.contains(&format!("of {} bytes", long.len())));
        let multibyte = "é".repeat(100);
        assert!(compact_output(multibyte, 51).contains("truncated"));
    }
}
