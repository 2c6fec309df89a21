//! A call's shape: all that Cedar's check of a request against the schema
//! depends on, so that a shape the schema accepted (or refused) once is
//! not checked again.
//!
//! Cedar types a request by its principal, action and resource (their
//! types, and their ids where a schema enumerates them) and by the type of
//! each context value: which attributes a record has, whether a value is a
//! string, an integer, a boolean, a set (and of what) or a record. No
//! string's, integer's or boolean's value matters. The shape written here
//! holds exactly that (the principal's and the tool's ids included), each
//! name written with its length first, so two different requests never
//! write the same shape. Checking a request costs about half a Cedar
//! decision (BENCHMARKS.md); looking its shape up costs a hash of a short
//! string.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::RwLock;

use serde_json::Value;

/// The most shapes remembered of each verdict (each a short string): past
/// it, a new shape is checked by Cedar on every call, which is correct,
/// only slower.
pub const MAX_KNOWN: usize = 16_384;

/// The shapes the schema accepted, and those it refused.
#[derive(Debug, Default)]
pub struct Known {
    accepted: RwLock<HashSet<String>>,
    refused: RwLock<HashSet<String>>,
}

impl Known {
    /// What the schema said of `shape` before: `Some(true)` it accepted
    /// it, `Some(false)` it refused it, `None` it was not asked (or the
    /// answer was not kept).
    pub fn verdict(&self, shape: &str) -> Option<bool> {
        if self.accepted.read().unwrap_or_else(|e| e.into_inner()).contains(shape) {
            return Some(true);
        }
        if self.refused.read().unwrap_or_else(|e| e.into_inner()).contains(shape) {
            return Some(false);
        }
        None
    }

    /// Remembers what the schema said of `shape`.
    pub fn insert(&self, shape: String, accepted: bool) {
        let set = if accepted { &self.accepted } else { &self.refused };
        let mut known = set.write().unwrap_or_else(|e| e.into_inner());
        if known.len() < MAX_KNOWN {
            known.insert(shape);
        }
    }
}

/// Writes a name: its length, then itself.
pub fn name(out: &mut String, name: &str) {
    // The length's digits by hand: `write!` costs more than the rest of
    // a short shape.
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut len = name.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (len % 10) as u8;
        len /= 10;
        if len == 0 {
            break;
        }
    }
    for digit in &digits[at..] {
        out.push(char::from(*digit));
    }
    out.push(':');
    out.push_str(name);
}

/// A string.
pub const STRING: char = 's';
/// A boolean.
pub const BOOL: char = 'b';
/// An integer.
pub const LONG: char = 'l';

/// Writes the shape of `value` as the provider gives it to Cedar (a
/// number that is not an integer is a string; `null` is left out, so
/// nothing is written and the answer is `false`).
pub fn value(out: &mut String, value: &Value) -> bool {
    match value {
        Value::Null => return false,
        Value::Bool(_) => out.push(BOOL),
        Value::Number(n) => out.push(if n.as_i64().is_some() { LONG } else { STRING }),
        Value::String(_) => out.push(STRING),
        Value::Array(items) => {
            let mut elements = BTreeSet::new();
            for item in items {
                let mut element = String::new();
                if self::value(&mut element, item) {
                    elements.insert(element);
                }
            }
            set(out, elements.iter().map(String::as_str));
        }
        Value::Object(map) => record(out, map.iter()),
    }
    true
}

/// Writes a set whose elements have the shapes `elements` (distinct, in
/// order).
pub fn set<'a>(out: &mut String, elements: impl Iterator<Item = &'a str>) {
    out.push('[');
    for element in elements {
        out.push_str(element);
        out.push(',');
    }
    out.push(']');
}

/// Writes a set of strings (`[]` when empty: an empty set fits any set).
pub fn strings(out: &mut String, empty: bool) {
    out.push_str(if empty { "[]" } else { "[s,]" });
}

/// Writes a record of `pairs` (in name order; `null`s left out).
pub fn record<'a>(out: &mut String, pairs: impl Iterator<Item = (&'a String, &'a Value)>) {
    let sorted: BTreeMap<&String, &Value> = pairs.collect();
    out.push('{');
    for (key, value) in sorted {
        let mark = out.len();
        name(out, key);
        if !self::value(out, value) {
            out.truncate(mark);
        }
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn shape(v: serde_json::Value) -> String {
        let mut out = String::new();
        super::value(&mut out, &v);
        out
    }

    #[test]
    fn values_of_one_type_share_a_shape_and_types_do_not() {
        assert_eq!(shape(json!({"a": "x", "b": 1})), shape(json!({"b": 2, "a": "y"})));
        assert_ne!(shape(json!({"a": "x"})), shape(json!({"a": 1})));
        assert_ne!(shape(json!({"a": 1})), shape(json!({"a": 1.5})));
        assert_eq!(shape(json!({"a": 1.5})), shape(json!({"a": "1.5"})));
        assert_ne!(shape(json!({"a": "x"})), shape(json!({"a": "x", "b": "y"})));
        assert_eq!(shape(json!({"a": "x", "b": null})), shape(json!({"a": "x"})));
        assert_eq!(shape(json!({"a": ["x", "y"]})), shape(json!({"a": ["z"]})));
        assert_ne!(shape(json!({"a": []})), shape(json!({"a": ["z"]})));
        assert_ne!(shape(json!({"a": ["z"]})), shape(json!({"a": ["z", 1]})));
        assert_ne!(shape(json!({"a": [{"k": 1}]})), shape(json!({"a": [{"k": "1"}]})));
        // A name is written with its length: no two sets of names collide.
        assert_ne!(shape(json!({"ab": "x"})), shape(json!({"a": "x", "b": "x"})));
        assert_ne!(shape(json!({"a:s": "x"})), shape(json!({"a": "x", "s": "x"})));
    }

    #[test]
    fn a_name_is_written_after_its_length() {
        for name in ["", "a", "123456789", "0123456789", &"x".repeat(100), &"y".repeat(12_345)] {
            let mut out = String::from(">");
            super::name(&mut out, name);
            assert_eq!(out, format!(">{}:{name}", name.len()));
        }
    }
}
