//! Typo hints: a top-level key that was meant to be `guardrails`.

/// Whether a top-level key looks like a misspelling of `guardrails`: at
/// most two edits from it (an insertion, deletion, substitution or swap of
/// two neighbours each), case aside.
pub(super) fn looks_like_guardrails(key: &str) -> bool {
    const SECTION: &str = "guardrails";
    // A key much longer or shorter cannot be two edits away.
    if key == SECTION || key.len() > SECTION.len() + 8 {
        return false;
    }
    edit_distance(&key.to_lowercase(), SECTION) <= 2
}

/// The optimal string alignment distance between `a` and `b`: insertions,
/// deletions, substitutions and swaps of two adjacent characters.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}
