//! `to_timestamp`: RFC 3339 / ISO 8601 text to Unix seconds, without a
//! date library.

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0i64, |acc, &b| b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0')))
}

/// Parses `YYYY-MM-DD`, optionally followed by `T`/space `HH:MM[:SS[.fff]]`
/// and `Z` or `±HH[:]MM`; no offset means UTC. Returns Unix seconds.
pub(super) fn parse_timestamp(text: &str) -> Option<f64> {
    let s = text.trim().as_bytes();
    let (y, m, d) = (digits(s, 0, 4)?, digits(s, 5, 2)?, digits(s, 8, 2)?);
    if s.get(4) != Some(&b'-') || s.get(7) != Some(&b'-') {
        return None;
    }
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) as f64 * 86_400.0;
    let mut i = 10;
    if i == s.len() {
        return Some(secs);
    }
    if !matches!(s[i], b'T' | b't' | b' ') {
        return None;
    }
    i += 1;
    let (hh, mm) = (digits(s, i, 2)?, digits(s, i + 3, 2)?);
    if s.get(i + 2) != Some(&b':') || hh > 23 || mm > 59 {
        return None;
    }
    i += 5;
    let mut ss = 0.0;
    if s.get(i) == Some(&b':') {
        let whole = digits(s, i + 1, 2)?;
        if whole > 60 {
            return None;
        }
        ss = whole as f64;
        i += 3;
        if s.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            let mut scale = 0.1;
            while let Some(b) = s.get(i).filter(|b| b.is_ascii_digit()) {
                ss += f64::from(b - b'0') * scale;
                scale /= 10.0;
                i += 1;
            }
            if i == start {
                return None;
            }
        }
    }
    secs += (hh * 3600 + mm * 60) as f64 + ss;
    match s.get(i) {
        None => Some(secs),
        Some(b'Z' | b'z') if i + 1 == s.len() => Some(secs),
        Some(&sign @ (b'+' | b'-')) => {
            let oh = digits(s, i + 1, 2)?;
            let rest = if s.get(i + 3) == Some(&b':') { i + 4 } else { i + 3 };
            let om = digits(s, rest, 2)?;
            if rest + 2 != s.len() || oh > 23 || om > 59 {
                return None;
            }
            let offset = (oh * 3600 + om * 60) as f64;
            Some(if sign == b'+' { secs - offset } else { secs + offset })
        }
        _ => None,
    }
}
