//! A JSON Schema of a type, read from its `Deserialize` implementation:
//! the type is deserialized from a probing deserializer that answers every
//! request with a sample value and notes what was asked (a boolean, a
//! string, a sequence of ..., a struct with these fields, one of these
//! enum variants). Which fields are required and whether unknown ones are
//! refused (`deny_unknown_fields`) is learnt by deserializing again with
//! fields left out and an unknown one put in. So the schema follows the
//! config types, renames, defaults and all, without a second description
//! of them to keep in step.
//!
//! What it cannot see: a value read with `deserialize_any` (untagged
//! enums, `serde_json::Value`) is any value (`{}`), enum variants are
//! taken as names (unit variants), and checks made after deserializing
//! (a pattern's syntax, a number's range) are not in the schema.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde_json::{json, Map, Value};

/// The key put in a struct to learn whether it refuses unknown keys.
const UNKNOWN_KEY: &str = "__guardhost_schema_probe__";

/// How many times a type is deserialized again, at most, per question.
const ATTEMPTS: usize = 64;

/// Why a probe's deserialization stopped.
#[derive(Debug)]
pub enum ProbeError {
    Missing(&'static str),
    Unknown,
    Other(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Missing(field) => write!(f, "missing field `{field}`"),
            ProbeError::Unknown => f.write_str("unknown field"),
            ProbeError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ProbeError {}

impl de::Error for ProbeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        ProbeError::Other(message.to_string())
    }
    fn missing_field(field: &'static str) -> Self {
        ProbeError::Missing(field)
    }
    fn unknown_field(_: &str, _: &'static [&'static str]) -> Self {
        ProbeError::Unknown
    }
}

/// What is known of one struct.
#[derive(Debug, Default)]
struct StructInfo {
    fields: Vec<&'static str>,
    shapes: BTreeMap<&'static str, Value>,
    required: BTreeSet<&'static str>,
    closed: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every field given (but those whose value cannot be made).
    Shape,
    /// This struct given only its required fields known so far (and,
    /// while that is unknown, an unknown key first).
    Discover(&'static str),
}

#[derive(Debug)]
struct Trace {
    structs: BTreeMap<&'static str, StructInfo>,
    skip: HashSet<(&'static str, &'static str)>,
    mode: Mode,
    failed: Option<(&'static str, &'static str)>,
    progress: bool,
    last: Value,
}

/// The schema of `T`, and of every struct it holds under `$defs` (named
/// `prefix` and the struct's name): `(schema of T, defs)`.
pub fn schema_of<T: DeserializeOwned>(prefix: &str) -> (Value, Map<String, Value>) {
    let trace = RefCell::new(Trace {
        structs: BTreeMap::new(),
        skip: HashSet::new(),
        mode: Mode::Shape,
        failed: None,
        progress: false,
        last: json!({}),
    });
    let mut root = None;
    for _ in 0..ATTEMPTS {
        trace.borrow_mut().failed = None;
        let result = T::deserialize(Probe(&trace));
        let mut state = trace.borrow_mut();
        root.get_or_insert_with(|| state.last.clone());
        match (result, state.failed.take()) {
            (Err(_), Some(failed)) if state.skip.insert(failed) => continue,
            _ => break,
        }
    }
    let names: Vec<&'static str> = trace.borrow().structs.keys().copied().collect();
    for name in names {
        for _ in 0..ATTEMPTS {
            {
                let mut state = trace.borrow_mut();
                state.mode = Mode::Discover(name);
                state.progress = false;
            }
            let _ = T::deserialize(Probe(&trace));
            if !trace.borrow().progress {
                break;
            }
        }
    }
    let trace = trace.into_inner();
    let reference = |value: Value| refer(value, prefix);
    let defs = trace
        .structs
        .iter()
        .map(|(name, info)| {
            let properties: Map<String, Value> = info
                .fields
                .iter()
                .map(|field| {
                    let shape = info.shapes.get(field).cloned().unwrap_or_else(|| json!({}));
                    ((*field).to_owned(), reference(shape))
                })
                .collect();
            let mut schema = json!({"type": "object", "properties": properties});
            if !info.required.is_empty() {
                schema["required"] = json!(info.required.iter().collect::<Vec<_>>());
            }
            if info.closed == Some(true) {
                schema["additionalProperties"] = json!(false);
            }
            (format!("{prefix}{name}"), schema)
        })
        .collect();
    (reference(root.unwrap_or_else(|| json!({}))), defs)
}

/// `{"$struct": NAME}` markers made `$ref`s to `#/$defs/PREFIX NAME`.
fn refer(value: Value, prefix: &str) -> Value {
    match value {
        Value::Object(map) => match map.get("$struct").and_then(Value::as_str) {
            Some(name) => json!({"$ref": format!("#/$defs/{prefix}{name}")}),
            None => Value::Object(map.into_iter().map(|(k, v)| (k, refer(v, prefix))).collect()),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(|v| refer(v, prefix)).collect()),
        other => other,
    }
}

/// The probing deserializer.
struct Probe<'a>(&'a RefCell<Trace>);

impl Probe<'_> {
    fn note(&self, shape: Value) {
        self.0.borrow_mut().last = shape;
    }

    fn take(&self) -> Value {
        std::mem::replace(&mut self.0.borrow_mut().last, json!({}))
    }
}

macro_rules! unsigned {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
            self.note(json!({"type": "integer", "minimum": 0}));
            visitor.visit_u64(1)
        }
    )*};
}

macro_rules! signed {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
            self.note(json!({"type": "integer"}));
            visitor.visit_i64(1)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = ProbeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({}));
        visitor.visit_unit()
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({"type": "boolean"}));
        visitor.visit_bool(false)
    }

    unsigned! { deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128 }
    signed! { deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128 }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({"type": "number"}));
        visitor.visit_f64(1.0)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({"type": "string", "minLength": 1, "maxLength": 1}));
        visitor.visit_char('x')
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({"type": "string"}));
        visitor.visit_str("x")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({"type": "string"}));
        visitor.visit_bytes(b"x")
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        let result = visitor.visit_some(Probe(self.0));
        let inner = self.take();
        self.note(json!({"anyOf": [inner, {"type": "null"}]}));
        result
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.note(json!({"type": "null"}));
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        let mut items = OneItem { trace: self.0, shape: None };
        let result = visitor.visit_seq(&mut items);
        let item = items.shape.unwrap_or_else(|| json!({}));
        self.note(json!({"type": "array", "items": item}));
        result
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, ProbeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        let mut entries = OneEntry { trace: self.0, state: 0, value: None };
        let result = visitor.visit_map(&mut entries);
        let value = entries.value.unwrap_or_else(|| json!({}));
        self.note(json!({"type": "object", "additionalProperties": value}));
        result
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        let (keys, unknown_first, discovering) = {
            let mut state = self.0.borrow_mut();
            let mode = state.mode;
            let skip: Vec<&'static str> =
                fields.iter().copied().filter(|f| state.skip.contains(&(name, *f))).collect();
            let info = state.structs.entry(name).or_default();
            info.fields = fields.to_vec();
            match mode {
                Mode::Discover(target) if target == name => {
                    let keys = fields.iter().copied().filter(|f| info.required.contains(f)).collect();
                    (keys, info.closed.is_none(), true)
                }
                _ => (fields.iter().copied().filter(|f| !skip.contains(f)).collect::<Vec<_>>(), false, false),
            }
        };
        let access = Fields { trace: self.0, name, keys, next: 0, unknown_first, current: None };
        let result = visitor.visit_map(access);
        {
            let mut state = self.0.borrow_mut();
            let progress = {
                let info = state.structs.entry(name).or_default();
                match (&result, discovering) {
                    (Err(ProbeError::Unknown), true) => info.closed.replace(true).is_none(),
                    (Err(ProbeError::Missing(field)), _) => {
                        let first = info.closed.is_none() && discovering;
                        if first {
                            info.closed = Some(false);
                        }
                        info.required.insert(field) && discovering || first
                    }
                    (_, true) => {
                        info.closed.get_or_insert(false);
                        false
                    }
                    _ => false,
                }
            };
            state.progress |= progress;
            state.last = json!({ "$struct": name });
        }
        result
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.note(json!({"enum": variants}));
        let first = variants.first().copied().unwrap_or_default();
        visitor.visit_enum(first.into_deserializer())
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_unit()
    }
}

/// A sequence of one probed item (none when the item cannot be made).
struct OneItem<'a> {
    trace: &'a RefCell<Trace>,
    shape: Option<Value>,
}

impl<'de> de::SeqAccess<'de> for &mut OneItem<'_> {
    type Error = ProbeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ProbeError> {
        if self.shape.is_some() {
            return Ok(None);
        }
        let probe = Probe(self.trace);
        let item = seed.deserialize(Probe(self.trace));
        self.shape = Some(probe.take());
        Ok(item.ok())
    }
}

/// A map of one probed entry.
struct OneEntry<'a> {
    trace: &'a RefCell<Trace>,
    state: u8,
    value: Option<Value>,
}

impl<'de> de::MapAccess<'de> for &mut OneEntry<'_> {
    type Error = ProbeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ProbeError> {
        if self.state > 0 {
            return Ok(None);
        }
        self.state = 1;
        Ok(seed.deserialize(Probe(self.trace)).ok())
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ProbeError> {
        let probe = Probe(self.trace);
        let value = seed.deserialize(Probe(self.trace));
        self.value = Some(probe.take());
        value
    }
}

/// A struct's fields, each with a probed value.
struct Fields<'a> {
    trace: &'a RefCell<Trace>,
    name: &'static str,
    keys: Vec<&'static str>,
    next: usize,
    unknown_first: bool,
    current: Option<&'static str>,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = ProbeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ProbeError> {
        if self.unknown_first {
            self.unknown_first = false;
            self.current = None;
            return seed.deserialize(UNKNOWN_KEY.into_deserializer()).map(Some);
        }
        let Some(key) = self.keys.get(self.next).copied() else { return Ok(None) };
        self.next += 1;
        self.current = Some(key);
        seed.deserialize(key.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ProbeError> {
        let probe = Probe(self.trace);
        let value = seed.deserialize(Probe(self.trace));
        let shape = probe.take();
        if let Some(field) = self.current {
            let mut state = self.trace.borrow_mut();
            if value.is_err() && state.failed.is_none() {
                state.failed = Some((self.name, field));
            }
            state.structs.entry(self.name).or_default().shapes.entry(field).or_insert(shape);
        }
        // What a struct below lacked or refused is not this struct's.
        value.map_err(|error| match error {
            ProbeError::Missing(_) | ProbeError::Unknown => ProbeError::Other(format!("below: {error}")),
            other => other,
        })
    }
}
