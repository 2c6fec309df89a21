//! The JSON-lines input of `guardhost run`: one tool call per line, and the
//! error tool message that answers a line that is not one.
//!
//! ```
//! let call = guardhost_lines::jsonl::parse_line(1, br#"{"name": "bash", "args": {"command": "ls"}, "id": "c1"}"#).unwrap();
//! assert_eq!(call.tool_call.name.as_deref(), Some("bash"));
//! let error = guardhost_lines::jsonl::parse_line(2, b"{").unwrap_err();
//! assert!(error.content.starts_with("guardhost: line 2: invalid JSON"));
//! // A key twice anywhere in a call is refused, naming where: an executor
//! // that keeps the first value would run something else than was decided.
//! let error = guardhost_lines::jsonl::parse_line(3, br#"{"name": "bash", "args": {"command": "sudo rm -rf /", "command": "ls"}}"#).unwrap_err();
//! assert!(error.content.starts_with("guardhost: line 3: duplicate key `args.command`"), "{}", error.content);
//! ```

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use guardhost::{ToolCall, ToolCallRequest, ToolMessage, ToolStatus};

/// A tool call's `name` or `id` as DeerFlow reads it with `str(...)`: a
/// string as it is, `null` as `None`, a number or boolean as Python
/// prints it. A list or mapping is refused (`Err` names its type).
fn python_str(value: &Value) -> Result<String, &'static str> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok("None".to_owned()),
        Value::Bool(true) => Ok("True".to_owned()),
        Value::Bool(false) => Ok("False".to_owned()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Array(_) => Err("a list"),
        Value::Object(_) => Err("a mapping"),
    }
}

/// The answer to a line that is not a usable tool call; the call's id and
/// name are kept when they could be read.
pub fn line_error(number: u64, problem: &str, id: Option<&str>, name: Option<&str>) -> ToolMessage {
    ToolMessage {
        content: format!("guardhost: line {number}: {problem}"),
        tool_call_id: id.unwrap_or("missing_id").to_owned(),
        name: Some(name.unwrap_or("unknown_tool").to_owned()),
        status: ToolStatus::Error,
    }
}

/// What a well-formed line looks like, for the answers to malformed ones.
const EXPECTED: &str =
    "expected one JSON object per line: {\"name\": \"tool\", \"args\": {...}, \"id\": \"call id\", \"context\": {...}}";

/// Parses one line into a tool call, or says what is wrong with it.
pub fn parse_line(number: u64, bytes: &[u8]) -> Result<ToolCallRequest, ToolMessage> {
    // The common line (an object with string or null `name` and `id`,
    // mappings or null for `args` and `context`, no key twice) straight
    // into the call, without a `Value` for the whole line; any other line,
    // well-formed or not, takes the general path, which has the last word
    // on every answer.
    if let Ok((call, _)) = fast(bytes, false) {
        return Ok(call);
    }
    parse_general(number, bytes)
}

/// [`parse_line`], and the call's arguments as the JSON text the line holds
/// them in (when the line is read by the fast path and they are a
/// mapping): a provider library that reads arguments is handed that text
/// ([`guardhost::GuardrailMiddleware::decide_with_args_text`]) instead of
/// their serialisation. Reading the text costs a little more than the
/// arguments alone: ask for it only when a provider reads them.
///
/// ```
/// let line = br#"{"name": "bash", "args": {"command":  "ls"}}"#;
/// let (call, text) = guardhost_lines::jsonl::parse_line_with_args_text(1, line).unwrap();
/// assert_eq!(text, Some(r#"{"command":  "ls"}"#));
/// assert_eq!(call.tool_call.args["command"], "ls");
/// ```
pub fn parse_line_with_args_text(
    number: u64,
    bytes: &[u8],
) -> Result<(ToolCallRequest, Option<&str>), ToolMessage> {
    if let Ok(parsed) = fast(bytes, true) {
        return Ok(parsed);
    }
    parse_general(number, bytes).map(|call| (call, None))
}

/// The fast path of [`parse_line`], with the arguments' text when `keep`.
fn fast(bytes: &[u8], keep: bool) -> serde_json::Result<(ToolCallRequest, Option<&str>)> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = Fast { keep_args_text: keep }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(parsed)
}

/// How [`parse_line`]'s fast path reads a line: what the general path makes
/// of it, whenever this reads it at all (and, when asked, the arguments'
/// text as the line has it).
struct Fast {
    keep_args_text: bool,
}

/// A key of a line's object.
enum Key {
    Name,
    Args,
    Id,
    Context,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "name" => Key::Name,
                    "args" => Key::Args,
                    "id" => Key::Id,
                    "context" => Key::Context,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> DeserializeSeed<'de> for Fast {
    type Value = (ToolCallRequest, Option<&'de str>);

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        use serde::de::Error;
        struct FastVisitor {
            keep_args_text: bool,
        }
        impl<'de> serde::de::Visitor<'de> for FastVisitor {
            type Value = (ToolCallRequest, Option<&'de str>);
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tool call")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // `None`: the key was not seen; the general path reads a
                // key seen twice (the last one wins there).
                let (mut name, mut id, mut args, mut context) = (None, None, None, None);
                let mut args_text = None;
                fn once<T, E: Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
                    match slot.replace(value) {
                        None => Ok(()),
                        Some(_) => Err(E::custom("a key twice")),
                    }
                }
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        // A string, or null (`str(None)`); a number or a
                        // boolean takes the general path.
                        Key::Name => once(&mut name, map.next_value::<Option<String>>()?)?,
                        Key::Id => once(&mut id, map.next_value::<Option<String>>()?)?,
                        // A key twice within them is refused (the general
                        // path says where).
                        // Kept as the line's text, then read from it.
                        Key::Args if self.keep_args_text => {
                            let text: &'de RawValue = map.next_value()?;
                            let mut read = serde_json::Deserializer::from_str(text.get());
                            let value =
                                MappingOrNull(At::Root).deserialize(&mut read).map_err(A::Error::custom)?;
                            if value.is_some() {
                                args_text = Some(text.get());
                            }
                            once(&mut args, value)?;
                        }
                        Key::Args => once(&mut args, map.next_value_seed(MappingOrNull(At::Root))?)?,
                        // A context that is not a mapping is warned about
                        // by the general path.
                        Key::Context => once(&mut context, map.next_value_seed(MappingOrNull(At::Root))?)?,
                        // As a `Value`, which refuses what the general path
                        // refuses (an out-of-range number, a key twice, ...).
                        Key::Other => drop(map.next_value_seed(Unique(At::Root))?),
                    }
                }
                let null_id = matches!(id, Some(None));
                let call = ToolCall {
                    name: name.map(|name: Option<String>| name.unwrap_or_else(|| "None".to_owned())),
                    args: args.flatten().unwrap_or_default(),
                    id: id.flatten(),
                    null_id,
                };
                Ok((ToolCallRequest { tool_call: call, context: context.flatten() }, args_text))
            }
        }
        deserializer.deserialize_map(FastVisitor { keep_args_text: self.keep_args_text })
    }
}

/// [`parse_line`] for any line: through a `Value`.
fn parse_general(number: u64, bytes: &[u8]) -> Result<ToolCallRequest, ToolMessage> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| line_error(number, &format!("not valid UTF-8 ({e}); {EXPECTED}"), None, None))?;
    if text.trim().is_empty() {
        return Err(line_error(number, &format!("empty line; {EXPECTED}"), None, None));
    }
    let value = parse_unique(text).map_err(|e| match e {
        NotUnique::Duplicate { path, at } => {
            let (id, name) = unambiguous_id_and_name(text.as_bytes());
            line_error(
                number,
                &format!(
                    "duplicate key `{path}` ({at}): a key may appear once in an object, or the \
                     call decided and the call run could differ; send each key once"
                ),
                id.as_deref(),
                name.as_deref(),
            )
        }
        NotUnique::Json(e) => line_error(number, &format!("invalid JSON ({e}); {EXPECTED}"), None, None),
    })?;
    let Value::Object(mut object) = value else {
        return Err(line_error(number, &format!("not a JSON object; {EXPECTED}"), None, None));
    };
    let invalid = |object: &Map<String, Value>, problem: String| {
        let field = |key: &str| object.get(key).and_then(|v| python_str(v).ok());
        let (id, name) = (field("id"), field("name"));
        line_error(
            number,
            &format!("invalid tool call: {problem}; {EXPECTED}"),
            id.as_deref(),
            name.as_deref(),
        )
    };
    let args = match object.remove("args") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args,
        Some(other) => {
            let problem = format!("`args` must be a mapping, found {}", guardhost::json::json_type(&other));
            return Err(invalid(&object, problem));
        }
    };
    let name = match object.get("name").map(python_str).transpose() {
        Ok(name) => name,
        Err(found) => return Err(invalid(&object, format!("`name` must be a string, found {found}"))),
    };
    let id = match object.get("id") {
        None | Some(Value::Null) => None,
        Some(id) => match python_str(id) {
            Ok(id) => Some(id),
            Err(found) => return Err(invalid(&object, format!("`id` must be a string, found {found}"))),
        },
    };
    let null_id = object.get("id") == Some(&Value::Null);
    let context = match object.remove("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(context)) => Some(context),
        // DeerFlow reads a runtime context that is not a dict as empty.
        Some(other) => {
            tracing::warn!(
                line = number,
                "the context is {}, not a mapping: read as empty, as DeerFlow does",
                guardhost::json::json_type(&other)
            );
            Some(Map::new())
        }
    };
    Ok(ToolCallRequest { tool_call: ToolCall { name, args, id, null_id }, context })
}

// ------------------------------------------------------------ long lines

/// The default `--max-line-bytes` of `guardhost run`: 4 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 << 20;

/// How much of a line beyond the limit is kept to read its id and name.
const KEPT_OF_A_LONG_LINE: usize = 64 << 10;

/// One line read by [`read_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The whole line is in the buffer, without its `\n` or `\r\n`.
    Whole,
    /// The line has `length` bytes (without its end), more than the limit:
    /// the buffer holds only its start, and the rest was read and dropped.
    TooLong {
        /// The line's length in bytes.
        length: u64,
    },
}

/// Reads the next line of `reader` into `line` (cleared first), holding at
/// most `limit` bytes of it in memory: a longer line is read to its end
/// and dropped but for its first bytes ([`Line::TooLong`]). `None` at the
/// end of the input.
pub fn read_line(
    reader: &mut impl std::io::BufRead,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Option<Line>> {
    use std::io::{BufRead, Read};
    line.clear();
    // Up to one byte past the limit, or the line's end if it comes first
    // (`read_until` finds it with memchr).
    let keep = limit.saturating_add(1);
    let read = (&mut *reader).take(keep as u64).read_until(b'\n', line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        return Ok(Some(Line::Whole));
    }
    if read < keep {
        return Ok(Some(Line::Whole)); // the last line, without its `\n`
    }
    // `limit` bytes and a `\r` whose `\n` comes next: a line at the limit.
    if line.last() == Some(&b'\r') && reader.fill_buf()?.first() == Some(&b'\n') {
        reader.consume(1);
        line.pop();
        return Ok(Some(Line::Whole));
    }
    // Too long: the rest is read and dropped.
    let mut length = read as u64;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            break;
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(end) => {
                length += end as u64;
                reader.consume(end + 1);
                break;
            }
            None => {
                let n = available.len();
                length += n as u64;
                reader.consume(n);
            }
        }
    }
    line.truncate(KEPT_OF_A_LONG_LINE.min(limit));
    Ok(Some(Line::TooLong { length }))
}

/// The answer to line `number`, `length` bytes long, over `limit`: its id
/// and name when they come, as strings, before anything else in `start`
/// (the line's first bytes) that could not be read.
pub fn too_long(
    number: u64,
    length: u64,
    limit: usize,
    start: &[u8],
) -> (ToolMessage, Option<String>, Option<String>) {
    let (id, name) = leading_id_and_name(start);
    let message = line_error(
        number,
        &format!(
            "the line is {length} bytes, more than the {limit} bytes a line may have (--max-line-bytes); \
             it was not read: send a smaller call, or raise the limit"
        ),
        id.as_deref(),
        name.as_deref(),
    );
    (message, id, name)
}

/// The top-level string `id` and `name` of the object `start` begins,
/// read until its text stops (it is the start of a longer line) or a key
/// comes twice.
fn leading_id_and_name(start: &[u8]) -> (Option<String>, Option<String>) {
    struct Seen<'s>(&'s mut [Option<Option<String>>; 2]);
    impl<'de> Visitor<'de> for Seen<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let slot = match key.as_ref() {
                    "id" => &mut self.0[0],
                    "name" => &mut self.0[1],
                    _ => {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        continue;
                    }
                };
                if slot.is_some() {
                    // Twice: neither can be trusted.
                    *slot = Some(None);
                    return Err(A::Error::custom("a key twice"));
                }
                match map.next_value::<Option<String>>() {
                    Ok(value) => *slot = Some(value),
                    Err(error) => {
                        *slot = Some(None);
                        return Err(error);
                    }
                }
            }
            Ok(())
        }
    }
    let mut seen = [None, None];
    let mut deserializer = serde_json::Deserializer::from_slice(start);
    let _ = serde::Deserializer::deserialize_map(&mut deserializer, Seen(&mut seen));
    let [id, name] = seen;
    (id.flatten(), name.flatten())
}

// ------------------------------------------------------------ unique keys

/// Why a text could not be read by [`parse_unique`].
#[derive(Debug)]
pub enum NotUnique {
    /// An object has a key twice: where (`args.command`, `args.list[2].x`),
    /// and where in the text the second one's value ends.
    Duplicate {
        /// The key's path from the top: keys joined by `.`, indices in `[]`.
        path: String,
        /// `column C`, or `line L column C` in a text of several lines.
        at: String,
    },
    /// Not JSON (serde_json's own message).
    Json(serde_json::Error),
}

/// The prefix of the message that marks a duplicate key, inside a serde
/// error (which has only a message to carry it).
const DUPLICATE: &str = "\u{0}duplicate key ";

/// Parses JSON `text` as serde_json does into a [`Value`], refusing an
/// object that has a key twice at any depth (serde_json keeps the last
/// silently, while other readers keep the first). One pass, no more work
/// than serde_json's own: each key is inserted once, into the map it
/// belongs to.
pub fn parse_unique(text: &str) -> Result<Value, NotUnique> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Unique(At::Root).deserialize(&mut deserializer).and_then(|value| {
        deserializer.end()?;
        Ok(value)
    });
    parsed.map_err(|error| {
        let message = error.to_string();
        match message.strip_prefix(DUPLICATE) {
            Some(path) => NotUnique::Duplicate {
                // serde_json appends " at line L column C".
                path: path.rsplit_once(" at line ").map_or(path, |(path, _)| path).to_owned(),
                at: match error.line() {
                    1 => format!("column {}", error.column()),
                    line => format!("line {line} column {}", error.column()),
                },
            },
            None => NotUnique::Json(error),
        }
    })
}

/// Where a value is in the document: under its parent's key or index.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    /// `args.command`, `calls[2].args.x`; a long key is cut short.
    fn path(&self) -> String {
        let mut segments = Vec::new();
        let mut at = self;
        loop {
            match at {
                At::Root => break,
                At::Key(parent, key) => {
                    segments.push(match key.char_indices().nth(64) {
                        Some((end, _)) => format!("{}...", &key[..end]),
                        None => (*key).to_owned(),
                    });
                    at = parent;
                }
                At::Index(parent, index) => {
                    segments.push(format!("[{index}]"));
                    at = parent;
                }
            }
        }
        let mut path = String::new();
        for segment in segments.iter().rev() {
            if !path.is_empty() && !segment.starts_with('[') {
                path.push('.');
            }
            path.push_str(segment);
        }
        path
    }
}

/// A [`Value`] whose objects have each key once; `At` says where it is.
struct Unique<'a>(At<'a>);

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// The entries of an object whose keys are each there once.
fn unique_entries<'de, A: MapAccess<'de>>(at: At<'_>, mut map: A) -> Result<Map<String, Value>, A::Error> {
    let mut entries = Map::new();
    while let Some(key) = map.next_key::<String>()? {
        let value = map.next_value_seed(Unique(At::Key(&at, &key)))?;
        match entries.entry(key) {
            Entry::Vacant(slot) => {
                slot.insert(value);
            }
            Entry::Occupied(slot) => {
                let path = At::Key(&at, slot.key()).path();
                return Err(A::Error::custom(format_args!("{DUPLICATE}{path}")));
            }
        }
    }
    Ok(entries)
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // As serde_json's `Value` (JSON text has no NaN or infinity).
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(Unique(At::Index(&self.0, items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        unique_entries(self.0, map).map(Value::Object)
    }
}

/// `args` or `context` on the fast path: a mapping with each key once, or
/// null; anything else is an error (the general path answers it).
struct MappingOrNull<'a>(At<'a>);

impl<'de> DeserializeSeed<'de> for MappingOrNull<'_> {
    type Value = Option<Map<String, Value>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MappingOrNull<'_> {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a mapping or null")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        // The path is the general path's to give.
        unique_entries(self.0, map).map(Some)
    }
}

/// The `id` and `name` of a line that is a JSON object, when they are
/// strings and each is there once (a line with two ids has none anyone can
/// trust); whatever else the line holds, duplicates too, is skipped.
pub fn unambiguous_id_and_name(bytes: &[u8]) -> (Option<String>, Option<String>) {
    struct IdAndName;
    impl<'de> Visitor<'de> for IdAndName {
        type Value = (Option<String>, Option<String>);
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            // (seen, the value when it is a string)
            let (mut id, mut name) = ((false, None), (false, None));
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let slot = match key.as_ref() {
                    "id" => &mut id,
                    "name" => &mut name,
                    _ => {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        continue;
                    }
                };
                let value = map.next_value::<Value>()?;
                *slot = match (slot.0, value) {
                    (false, Value::String(text)) => (true, Some(text)),
                    _ => (true, None),
                };
            }
            Ok((id.1, name.1))
        }
    }
    struct Top;
    impl<'de> DeserializeSeed<'de> for Top {
        type Value = (Option<String>, Option<String>);
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(IdAndName)
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    match Top.deserialize(&mut deserializer) {
        Ok(found) if deserializer.end().is_ok() => found,
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests;
