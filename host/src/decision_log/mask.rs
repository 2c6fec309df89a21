//! `decision_log.mask`: which argument values the decision log writes as
//! `"***"`.
//!
//! A pattern is a dotted path of steps:
//!
//! | step | matches |
//! |---|---|
//! | `name` | the key `name`, in any letter case; on an array, that key in every element |
//! | `*` | any one key; on an array, every element |
//! | `**` | any number of levels (none too), through objects and arrays |
//! | `name[2]`, `[2]` | element 2 (from 0) of the array under `name` / of this array |
//! | `name[*]`, `[*]` | every element of that array |
//!
//! A pattern matches at any depth of the arguments (as if it began with
//! `**.`) unless it begins with `$.`, which anchors it at their top. The
//! value a pattern reaches is replaced whole, whatever its type.

use serde_json::Value;

/// The text a masked value is replaced by.
pub const MASKED: &str = "***";

/// Why a `mask` pattern cannot be read. The messages never quote the
/// pattern (a configured value); they say where it is wrong and how to
/// write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaskPatternError {
    /// The pattern is empty, or only `$.`.
    #[error("the pattern is empty; write a key (`password`) or a dotted path (`headers.authorization`)")]
    Empty,
    /// Two dots with nothing between them, or a dot at an end.
    #[error(
        "step {step} is empty (two dots in a row, or a dot at an end); write a key, `*` or `**` between dots"
    )]
    EmptyStep {
        /// Which step, from 1.
        step: usize,
    },
    /// `[` without its `]`, or text after a `]` that is not another `[...]`.
    #[error(
        "step {step} has a bracket out of place; an index follows a key and is written `[0]` or `[*]`, \
         as in `list[0].password`"
    )]
    Bracket {
        /// Which step, from 1.
        step: usize,
    },
    /// Something other than digits or `*` between brackets.
    #[error("step {step} has an index that is neither a number nor `*`; write `[0]`, `[1]` ... or `[*]`")]
    Index {
        /// Which step, from 1.
        step: usize,
    },
    /// `**` last: it would name no key.
    #[error("the pattern ends with `**`, which names no key; write what follows it (`**.password`), or the key itself to mask all under it")]
    TrailingDeep,
    /// `**` or `*` written together with other text in one step.
    #[error("step {step} mixes `*` with other text; `*` and `**` stand alone between dots (a key is matched whole)")]
    Wildcard {
        /// Which step, from 1.
        step: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A key, lower-cased.
    Key(String),
    /// Any one key or element.
    AnyKey,
    /// One array element.
    Index(usize),
    /// Every array element.
    AnyIndex,
    /// Any number of levels.
    Deep,
}

/// One parsed `mask` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskPattern {
    steps: Vec<Step>,
}

fn folded(text: &str) -> String {
    text.chars().flat_map(char::to_lowercase).collect()
}

fn same_key(key: &str, folded_name: &str) -> bool {
    if key.is_ascii() && folded_name.is_ascii() {
        // The common case, without walking characters one at a time. (A
        // key with a character outside ASCII that lower-cases into ASCII,
        // such as the Kelvin sign, takes the general path.)
        return key.eq_ignore_ascii_case(folded_name);
    }
    key.chars().flat_map(char::to_lowercase).eq(folded_name.chars())
}

impl MaskPattern {
    /// Reads `text` (the syntax is in the module docs).
    pub fn parse(text: &str) -> Result<MaskPattern, MaskPatternError> {
        let (anchored, rest) = match text.strip_prefix("$.") {
            Some(rest) => (true, rest),
            None if text == "$" => return Err(MaskPatternError::Empty),
            None => (false, text),
        };
        if rest.is_empty() {
            return Err(MaskPatternError::Empty);
        }
        let mut steps = Vec::new();
        if !anchored {
            steps.push(Step::Deep);
        }
        for (n, part) in rest.split('.').enumerate() {
            let step = n + 1;
            if part.is_empty() {
                return Err(MaskPatternError::EmptyStep { step });
            }
            let (name, mut indexes) = match part.find('[') {
                Some(at) => part.split_at(at),
                None => (part, ""),
            };
            if name.contains(']') {
                return Err(MaskPatternError::Bracket { step });
            }
            match name {
                "" => {}
                "**" if indexes.is_empty() => {
                    if steps.last() != Some(&Step::Deep) {
                        steps.push(Step::Deep);
                    }
                }
                "*" => steps.push(Step::AnyKey),
                name if name.contains('*') => return Err(MaskPatternError::Wildcard { step }),
                name => steps.push(Step::Key(folded(name))),
            }
            while !indexes.is_empty() {
                let Some(inner) = indexes.strip_prefix('[') else {
                    return Err(MaskPatternError::Bracket { step });
                };
                let Some(end) = inner.find(']') else { return Err(MaskPatternError::Bracket { step }) };
                let index = &inner[..end];
                if index.contains('[') {
                    return Err(MaskPatternError::Bracket { step });
                }
                steps.push(match index {
                    "*" => Step::AnyIndex,
                    digits if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                        Step::Index(digits.parse().map_err(|_| MaskPatternError::Index { step })?)
                    }
                    _ => return Err(MaskPatternError::Index { step }),
                });
                indexes = &inner[end + 1..];
            }
        }
        if steps.last() == Some(&Step::Deep) {
            return Err(MaskPatternError::TrailingDeep);
        }
        Ok(MaskPattern { steps })
    }

    /// Replaces every value this pattern reaches in `value` by [`MASKED`].
    pub fn apply(&self, value: &mut Value) {
        apply(value, &self.steps);
    }
}

fn apply(value: &mut Value, steps: &[Step]) {
    let Some((first, rest)) = steps.split_first() else {
        *value = Value::from(MASKED);
        return;
    };
    match (first, value) {
        (Step::Deep, value) => {
            // None of the levels: the rest right here; then one level down,
            // still under `**`.
            apply(value, rest);
            match value {
                Value::Object(map) => map.values_mut().for_each(|v| apply(v, steps)),
                Value::Array(items) => items.iter_mut().for_each(|v| apply(v, steps)),
                _ => {}
            }
        }
        (Step::Key(name), Value::Object(map)) => {
            map.iter_mut().filter(|(key, _)| same_key(key, name)).for_each(|(_, v)| apply(v, rest));
        }
        (Step::AnyKey, Value::Object(map)) => map.values_mut().for_each(|v| apply(v, rest)),
        // A key step goes through arrays: `list.password` is the password
        // of every element; `*` is then every element.
        (Step::Key(_), Value::Array(items)) => items.iter_mut().for_each(|v| apply(v, steps)),
        (Step::AnyKey | Step::AnyIndex, Value::Array(items)) => items.iter_mut().for_each(|v| apply(v, rest)),
        (Step::Index(n), Value::Array(items)) => {
            if let Some(v) = items.get_mut(*n) {
                apply(v, rest);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn masked(patterns: &[&str], mut value: Value) -> Value {
        for pattern in patterns {
            MaskPattern::parse(pattern).unwrap().apply(&mut value);
        }
        value
    }

    #[test]
    fn a_bare_key_is_masked_at_any_depth_in_any_case_whatever_its_value() {
        let value = json!({
            "Password": "a", "nested": {"PASSWORD": {"x": 1}, "deeper": [{"password": [1, 2]}]},
            "list": [{"password": 3}, {"password": null}, {"other": "kept"}], "user": "ann"
        });
        assert_eq!(
            masked(&["password"], value.clone()),
            json!({
                "Password": "***", "nested": {"PASSWORD": "***", "deeper": [{"password": "***"}]},
                "list": [{"password": "***"}, {"password": "***"}, {"other": "kept"}], "user": "ann"
            })
        );
        assert_eq!(masked(&["**.password"], value.clone()), masked(&["password"], value));
        // Letter case beyond ASCII: the Kelvin sign lower-cases to `k`,
        // `É` to `é`.
        assert_eq!(
            masked(&["key", "clé"], json!({"\u{212A}ey": 1, "CLÉ": 2, "cle": 3})),
            json!({"\u{212A}ey": "***", "CLÉ": "***", "cle": 3})
        );
    }

    #[test]
    fn a_dotted_path_matches_wherever_it_begins_and_dollar_anchors_it() {
        let value = json!({
            "headers": {"Authorization": "Bearer a", "accept": "*/*"},
            "request": {"HEADERS": {"authorization": "Bearer b"}}, "authorization": "kept"
        });
        assert_eq!(
            masked(&["headers.authorization"], value.clone()),
            json!({
                "headers": {"Authorization": "***", "accept": "*/*"},
                "request": {"HEADERS": {"authorization": "***"}}, "authorization": "kept"
            })
        );
        assert_eq!(
            masked(&["$.headers.authorization"], value),
            json!({
                "headers": {"Authorization": "***", "accept": "*/*"},
                "request": {"HEADERS": {"authorization": "Bearer b"}}, "authorization": "kept"
            })
        );
    }

    #[test]
    fn arrays_by_index_every_element_and_transparently() {
        let value = json!({"list": [{"password": "a", "n": 1}, {"password": "b", "n": 2}]});
        assert_eq!(
            masked(&["list[0].password"], value.clone()),
            json!({"list": [{"password": "***", "n": 1}, {"password": "b", "n": 2}]})
        );
        let every = json!({"list": [{"password": "***", "n": 1}, {"password": "***", "n": 2}]});
        assert_eq!(masked(&["list[*].password"], value.clone()), every);
        assert_eq!(masked(&["list.password"], value.clone()), every);
        assert_eq!(
            masked(&["$.list[1]"], value.clone()),
            json!({"list": [{"password": "a", "n": 1}, "***"]})
        );
        assert_eq!(masked(&["list[*]"], value.clone()), json!({"list": ["***", "***"]}));
        assert_eq!(masked(&["list[7].password"], value.clone()), value, "no such element");
        let grid = json!({"m": [[{"k": 1}], [{"k": 2}]]});
        assert_eq!(masked(&["m[1][0].k"], grid.clone()), json!({"m": [[{"k": 1}], [{"k": "***"}]]}));
        assert_eq!(masked(&["m.k"], grid), json!({"m": [[{"k": "***"}], [{"k": "***"}]]}));
    }

    #[test]
    fn a_star_is_any_one_key_and_existing_paths_keep_their_meaning() {
        let value = json!({"env": {"A": "1", "B": {"c": 2}}, "user": "ann", "nested": {"env": {"C": 3}}});
        assert_eq!(
            masked(&["$.env.*"], value.clone()),
            json!({"env": {"A": "***", "B": "***"}, "user": "ann", "nested": {"env": {"C": 3}}})
        );
        assert_eq!(
            masked(&["env.*"], value),
            json!({"env": {"A": "***", "B": "***"}, "user": "ann", "nested": {"env": {"C": "***"}}})
        );
    }

    #[test]
    fn bad_patterns_say_what_is_wrong_without_quoting_them() {
        let error = |text: &str| MaskPattern::parse(text).unwrap_err();
        assert_eq!(error(""), MaskPatternError::Empty);
        assert_eq!(error("$."), MaskPatternError::Empty);
        assert_eq!(error("a..secret"), MaskPatternError::EmptyStep { step: 2 });
        assert_eq!(error("secret."), MaskPatternError::EmptyStep { step: 2 });
        assert_eq!(error("list[0.secret"), MaskPatternError::Bracket { step: 1 });
        assert_eq!(error("list]secret"), MaskPatternError::Bracket { step: 1 });
        assert_eq!(error("list[0]secret"), MaskPatternError::Bracket { step: 1 });
        assert_eq!(error("list[first]"), MaskPatternError::Index { step: 1 });
        assert_eq!(error("list[]"), MaskPatternError::Index { step: 1 });
        assert_eq!(error("a.**"), MaskPatternError::TrailingDeep);
        assert_eq!(error("secret*"), MaskPatternError::Wildcard { step: 1 });
        assert_eq!(error("a.**[0]"), MaskPatternError::Wildcard { step: 2 });
        for text in ["a..secret", "list[first]", "secret*"] {
            assert!(!error(text).to_string().contains("secret"), "{}", error(text));
        }
    }
}
