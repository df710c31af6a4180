//! BM25: how well a memory's terms match a query's.

use std::collections::HashMap;

/// Term-frequency saturation.
const K1: f64 = 1.2;
/// Length normalization.
const B: f64 = 0.75;

/// One memory holding a query term: its id, how often the term occurs, and its length.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Posting {
    pub id: String,
    pub tf: u32,
    pub length: u32,
}

/// The BM25 score of every memory in `postings` (one list per query term), over a collection
/// of `docs` memories of `avg_length` terms on average.
pub(super) fn score(postings: &[Vec<Posting>], docs: u64, avg_length: f64) -> HashMap<String, f64> {
    let mut scores: HashMap<String, f64> = HashMap::new();
    let n = docs.max(1) as f64;
    for list in postings {
        let df = list.len() as f64;
        if df == 0.0 {
            continue;
        }
        // The "plus one" form of idf: never negative, so a common term still counts a little.
        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
        for p in list {
            let tf = f64::from(p.tf);
            let norm = 1.0 - B + B * f64::from(p.length) / avg_length.max(1.0);
            *scores.entry(p.id.clone()).or_default() += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
        }
    }
    scores
}

/// A BM25 score mapped into [0, 1) so that it can be weighed against a vector similarity and
/// held to a relevance floor: a weak one-term match lands near 0.3, a good match above 0.6.
pub(super) fn normalized(score: f64) -> f64 {
    score / (score + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, tf: u32, length: u32) -> Posting {
        Posting {
            id: id.into(),
            tf,
            length,
        }
    }

    #[test]
    fn more_query_terms_matched_rank_higher_and_rare_terms_weigh_more() {
        // "deploy" is in a and b, "key" only in a.
        let postings = vec![vec![p("a", 1, 6), p("b", 1, 6)], vec![p("a", 1, 6)]];
        let s = score(&postings, 10, 6.0);
        assert!(s["a"] > s["b"]);
        let rare = score(&[vec![p("x", 1, 6)]], 100, 6.0)["x"];
        let common = score(
            &[(0..60).map(|i| p(&i.to_string(), 1, 6)).collect()],
            100,
            6.0,
        )["0"];
        assert!(rare > common);
        assert!(normalized(0.0) == 0.0 && normalized(100.0) < 1.0);
    }
}
