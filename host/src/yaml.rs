//! The one place that knows YAML: text in, a JSON value out.
//!
//! Everything else in the host works on `serde_json::Value`, so swapping the
//! YAML parser touches only this file.

use std::cell::{Cell, RefCell};

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_json::Value;

/// A YAML text that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    message: String,
}

/// The largest config text read, in bytes.
pub const MAX_BYTES: usize = 1024 * 1024;
/// The deepest nesting of lists and mappings.
pub const MAX_DEPTH: usize = 64;
/// The most values a document may hold, counting every use of an `*alias`
/// as a copy of what it refers to.
pub const MAX_NODES: usize = 100_000;

/// Parses YAML into a JSON value. Mapping keys must be strings; an empty
/// document is `null`.
///
/// Hostile text is refused before it can stall or exhaust the host: text
/// over [`MAX_BYTES`], flow (`[`/`{`) nesting over [`MAX_DEPTH`] (found by a
/// scan before the parser sees the text, because the parser's time grows
/// with that depth), and while the value is built, nesting over
/// [`MAX_DEPTH`] or more than [`MAX_NODES`] values after alias expansion
/// (an "alias bomb" stops at the budget instead of being built).
pub(crate) fn parse(text: &str) -> Result<Value, YamlError> {
    if text.len() > MAX_BYTES {
        return Err(too_large(Some(text.len())));
    }
    if let Some(line) = flow_too_deep(text) {
        return Err(depth_error(&format!("line {line}")));
    }
    let budget = Budget { nodes: Cell::new(0), failure: RefCell::new(None) };
    let seed = Node { budget: &budget, depth: 0, path: String::new() };
    let result = seed.deserialize(serde_yaml::Deserializer::from_str(text));
    match (result, budget.failure.into_inner()) {
        (_, Some(failure)) => Err(failure),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(YamlError { message: format!("invalid YAML: {e}") }),
    }
}

/// The error for a text over [`MAX_BYTES`] (of `len` bytes, when known).
pub(crate) fn too_large(len: Option<usize>) -> YamlError {
    let size = len.map_or("over 1 MiB".to_owned(), |len| format!("{len} bytes"));
    YamlError {
        message: format!(
            "the config is {size}, over the limit of {MAX_BYTES} bytes (1 MiB); a guardrails \
             config is a few kilobytes: move large data (policies, lists) into files the \
             provider reads"
        ),
    }
}

fn depth_error(at: &str) -> YamlError {
    YamlError {
        message: format!(
            "{at}: lists and mappings are nested more than {MAX_DEPTH} deep, over the limit of \
             {MAX_DEPTH}; flatten the config"
        ),
    }
}

fn nodes_error() -> YamlError {
    YamlError {
        message: format!(
            "the config holds more than {MAX_NODES} values once its `*alias` references are \
             expanded, over the limit of {MAX_NODES}; use fewer aliases (each one copies what \
             its `&anchor` names) or a smaller config"
        ),
    }
}

/// The line on which flow collections (`[`, `{`) first nest deeper than
/// [`MAX_DEPTH`], if they do. A cheap tokenizer that follows the parser's
/// rules where a token may start: it skips comments, quoted scalars and
/// block scalars (`|`, `>`), and takes a bracket inside a plain scalar as
/// text only where the parser does.
fn flow_too_deep(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let blank = |i: usize| bytes.get(i).is_none_or(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut line_start = 0usize;
    // Whether the next non-blank character starts a token (rather than
    // continuing a plain scalar).
    let mut token = true;
    let mut i = 0usize;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                line += 1;
                line_start = i + 1;
                // A block-context plain scalar ends at the line's end for
                // this scan's purposes; a flow one goes on.
                if depth == 0 {
                    token = true;
                }
            }
            b' ' | b'\t' | b'\r' => {}
            b'#' if i == 0 || blank(i - 1) => {
                while i + 1 < bytes.len() && bytes[i + 1] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' if token => {
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' if c == b'"' => i += 1,
                        b'\'' if c == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 1,
                        b'\n' => {
                            line += 1;
                            line_start = i + 1;
                        }
                        q if q == c => break,
                        _ => {}
                    }
                    i += 1;
                }
                token = false;
            }
            b'|' | b'>' if depth == 0 && token && block_header(&bytes[i + 1..]) => {
                let parent = block_parent(&bytes[line_start..i]);
                // Skip the header line, then the content lines.
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                let mut content: Option<usize> = None;
                while i < bytes.len() {
                    // `i` is at a line break.
                    let next = i + 1;
                    let rest = &bytes[next.min(bytes.len())..];
                    let indent = rest.iter().take_while(|&&b| b == b' ').count();
                    let empty = rest[indent..].first().is_none_or(|&b| matches!(b, b'\n' | b'\r'));
                    let inside = empty
                        || match content {
                            None => parent.is_none_or(|p| indent > p),
                            Some(c) => indent >= c,
                        };
                    if !inside {
                        break;
                    }
                    if !empty && content.is_none() {
                        content = Some(indent);
                    }
                    line += 1;
                    line_start = next;
                    i = next;
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                }
                token = true;
                continue;
            }
            b'[' | b'{' if token || depth > 0 => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(line);
                }
                token = true;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                token = false;
            }
            b',' if depth > 0 => token = true,
            // `:`, `?` and `-` followed by a blank are indicators; so is `:`
            // before a flow indicator inside a flow collection.
            b':' | b'?' | b'-'
                if blank(i + 1)
                    || (depth > 0
                        && c == b':'
                        && matches!(bytes.get(i + 1), Some(b',' | b'[' | b']' | b'{' | b'}'))) =>
            {
                token = true;
            }
            // Node properties: a blank after them starts the node.
            b'&' | b'!' if token => {
                while i + 1 < bytes.len()
                    && !blank(i + 1)
                    && !(depth > 0 && matches!(bytes[i + 1], b',' | b'[' | b']' | b'{' | b'}'))
                {
                    i += 1;
                }
            }
            _ => token = false,
        }
        i += 1;
    }
    None
}

/// Whether what follows a `|` or `>` makes it a block scalar header:
/// indicators (`+`, `-`, a digit), then only spaces and a comment.
fn block_header(rest: &[u8]) -> bool {
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let rest = &rest[..end];
    let indicators = rest.iter().take_while(|b| matches!(b, b'+' | b'-' | b'0'..=b'9')).count();
    let rest = &rest[indicators..];
    let spaces = rest.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'\r')).count();
    spaces == rest.len() || (spaces > 0 && rest[spaces] == b'#')
}

/// The column of the collection that holds a block scalar, from the text
/// of its header line before the `|`: the key's column after `key:`, the
/// last `-`'s column after `- `; `None` at the top level.
fn block_parent(before: &[u8]) -> Option<usize> {
    let mut col = before.iter().take_while(|&&b| b == b' ').count();
    let mut dash = None;
    while before.get(col) == Some(&b'-') && before.get(col + 1).is_some_and(|b| *b == b' ' || *b == b'\t') {
        dash = Some(col);
        col += 1;
        col += before[col..].iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
    }
    if before[col..].starts_with(b"---") {
        return dash;
    }
    let has_key = before[col..].contains(&b':');
    if has_key {
        Some(col)
    } else {
        dash
    }
}

/// What building the value has used, and the first limit it ran into.
struct Budget {
    nodes: Cell<usize>,
    failure: RefCell<Option<YamlError>>,
}

impl Budget {
    /// Records a failure and returns the error that stops the parser.
    fn fail<E: de::Error>(&self, error: YamlError) -> E {
        let mut failure = self.failure.borrow_mut();
        if failure.is_none() {
            *failure = Some(error);
        }
        E::custom("limit")
    }
}

/// Builds one value, counting it against the budget.
struct Node<'b> {
    budget: &'b Budget,
    depth: usize,
    path: String,
}

impl Node<'_> {
    fn child(&self, path: String) -> Node<'_> {
        Node { budget: self.budget, depth: self.depth + 1, path }
    }

    fn enter<E: de::Error>(&self) -> Result<(), E> {
        if self.depth >= MAX_DEPTH {
            let at =
                if self.path.is_empty() { "the top level".to_owned() } else { format!("`{}`", self.path) };
            return Err(self.budget.fail(depth_error(&at)));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let nodes = self.budget.nodes.get() + 1;
        if nodes > MAX_NODES {
            return Err(self.budget.fail(nodes_error()));
        }
        self.budget.nodes.set(nodes);
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::from(i))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::from(u))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            self.budget.fail(YamlError {
                message: format!("`{}`: the number {f} has no JSON form (NaN or infinite)", self.path),
            })
        })
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(format!("{}[{}]", self.path, items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key_seed(Key { node: &self })? {
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            let value = map.next_value_seed(self.child(path))?;
            if out.insert(key.clone(), value).is_some() {
                return Err(self.budget.fail(YamlError {
                    message: format!("`{}`: the key `{key}` appears twice; keep one", self.path),
                }));
            }
        }
        Ok(Value::Object(out))
    }

    /// A tagged value (`!tag value`) is its value.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (_tag, variant): (de::IgnoredAny, _) = data.variant()?;
        variant.newtype_variant_seed(self)
    }
}

/// Reads a mapping key, which must be a string.
struct Key<'n, 'b> {
    node: &'n Node<'b>,
}

impl Key<'_, '_> {
    fn refuse<E: de::Error>(&self, found: &str) -> E {
        self.node.budget.fail(YamlError {
            message: format!("`{}`: mapping keys must be strings, found {found}", self.node.path),
        })
    }
}

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E>(self, s: &str) -> Result<String, E> {
        Ok(s.to_owned())
    }

    fn visit_string<E>(self, s: String) -> Result<String, E> {
        Ok(s)
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Err(self.refuse("null"))
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<String, E> {
        Err(self.refuse(&b.to_string()))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<String, E> {
        Err(self.refuse(&i.to_string()))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<String, E> {
        Err(self.refuse(&u.to_string()))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<String, E> {
        Err(self.refuse(&f.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<String, A::Error> {
        Err(self.refuse("a list"))
    }

    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<String, A::Error> {
        Err(self.refuse("a mapping"))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<String, A::Error> {
        Err(self.refuse("a tagged value"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_scalars_and_sequences() {
        let v = parse("a: 1\nb: [x, true, null, 2.5]\nc: {d: e}\n").unwrap();
        assert_eq!(v, json!({"a": 1, "b": ["x", true, null, 2.5], "c": {"d": "e"}}));
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse("").unwrap(), Value::Null);
    }

    #[test]
    fn non_string_keys_are_named() {
        let err = parse("provider:\n  config:\n    1: x\n").unwrap_err().to_string();
        assert!(err.contains("`provider.config`: mapping keys must be strings, found 1"), "{err}");
    }

    #[test]
    fn syntax_errors_carry_a_location() {
        let err = parse("a: [1, 2\n").unwrap_err().to_string();
        assert!(err.starts_with("invalid YAML:") && err.contains("line"), "{err}");
    }

    /// ~400 KB that expands to 10^10 values: a wide anchor, referenced
    /// 1000 times by a second, itself referenced by a third.
    pub(crate) fn alias_bomb() -> String {
        let a = vec!["x"; 100_000].join(", ");
        let b = vec!["*a"; 1000].join(", ");
        let c = vec!["*b"; 100].join(", ");
        format!("a: &a [{a}]\nb: &b [{b}]\nc: [{c}]\n")
    }

    #[test]
    fn an_alias_bomb_stops_at_the_value_budget() {
        let bomb = alias_bomb();
        assert!(bomb.len() < MAX_BYTES);
        let err = parse(&bomb).unwrap_err().to_string();
        assert!(err.contains("more than 100000 values") && err.contains("`*alias`"), "{err}");
        // Aliases within the budget are expanded.
        assert_eq!(parse("a: &a [1, 2]\nb: *a\n").unwrap(), json!({"a": [1, 2], "b": [1, 2]}));
    }

    #[test]
    fn a_megabyte_of_brackets_is_refused_before_parsing() {
        let err = parse(&"[".repeat(MAX_BYTES)).unwrap_err().to_string();
        assert!(err.starts_with("line 1: lists and mappings are nested more than 64 deep"), "{err}");
        let err = parse(&"{".repeat(MAX_BYTES)).unwrap_err().to_string();
        assert!(err.contains("more than 64 deep"), "{err}");
    }

    #[test]
    fn oversized_text_is_refused() {
        let err = parse(&format!("a: 1\n{}", "#".repeat(MAX_BYTES))).unwrap_err().to_string();
        assert!(err.contains("over the limit of 1048576 bytes (1 MiB)"), "{err}");
    }

    #[test]
    fn deep_nesting_is_refused_in_every_style() {
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        parse(&ok).unwrap();
        let flow = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(parse(&flow).unwrap_err().to_string().contains("nested more than 64 deep"));
        let block: String = (0..70).map(|i| format!("{}k:\n", "  ".repeat(i))).collect();
        let err = parse(&block).unwrap_err().to_string();
        assert!(err.contains("nested more than 64 deep") && err.starts_with("`k.k.k"), "{err}");
        let dashes = format!("{}x\n", "- ".repeat(70));
        assert!(parse(&dashes).unwrap_err().to_string().contains("nested more than 64 deep"));
    }

    #[test]
    fn brackets_in_text_do_not_count_as_nesting() {
        let quoted = "a: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n";
        let plain = "b: x[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n";
        let single = "c: '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'\n";
        let block = format!("d: |\n  {}\n  [[[\ne: 1\n", "[".repeat(100));
        let comment = format!("# {}\nf: [1]\n", "[".repeat(100));
        for text in [quoted, plain, single, &block, &comment] {
            parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        // Brackets that only look quoted are counted.
        let sneaky = format!("a: x \"\nb: {}\n", "[".repeat(70));
        assert!(parse(&sneaky).unwrap_err().to_string().contains("more than 64 deep"));
    }

    #[test]
    fn tags_duplicates_and_nan_are_handled() {
        assert_eq!(parse("a: !custom {b: 1}\n").unwrap(), json!({"a": {"b": 1}}));
        assert!(parse("a: 1\na: 2\n").unwrap_err().to_string().contains("appears twice"));
        let err = parse("x:\n  y: .nan\n").unwrap_err().to_string();
        assert!(err.contains("`x.y`: the number NaN has no JSON form"), "{err}");
    }
}
