//! The numbers a person reads at the end of a run and on the spinner: what a run took, a
//! count with its thousands set apart, a span of time.

/// What a run took, as its end reports it.
pub struct Summary {
    pub turns: u32,
    pub tokens: (u64, u64),
    pub cost_cents: Option<f64>,
    pub duration: std::time::Duration,
}

impl Summary {
    /// `ryvos: 3 turns · 1,204 in / 96 out tokens · $0.0042 · 4.2s`.
    pub fn line(&self) -> String {
        let turns = match self.turns {
            1 => "1 turn".to_owned(),
            n => format!("{n} turns"),
        };
        let cost = (self.cost_cents).map_or_else(|| "cost unknown".to_owned(), crate::print::money);
        format!(
            "ryvos: {turns} · {} in / {} out tokens · {cost} · {}",
            thousands(self.tokens.0),
            thousands(self.tokens.1),
            duration(self.duration)
        )
    }
}

/// `n` with its thousands set apart: `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A span as a person reads it: `0.4s`, `12s`, `3m 05s`.
pub fn duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.1}s", d.as_secs_f64()),
        10..60 => format!("{secs}s"),
        _ => format!("{}m {:02}s", secs / 60, secs % 60),
    }
}

/// ` (12s)`, how long since `since`, once it is a second or more.
pub fn seconds(since: std::time::Instant) -> String {
    match since.elapsed().as_secs() {
        0 => String::new(),
        n => format!(" ({n}s)"),
    }
}
