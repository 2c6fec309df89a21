//! Deriving the accepted config keys from a `serde::Deserialize` type.
//!
//! A `#[derive(Deserialize)]` struct hands its field names to the
//! deserializer in `deserialize_struct`; this module asks for them and stops
//! there, so the list of accepted keys is never written by hand.

use serde::de::{self, Deserialize, Visitor};
use std::fmt;

#[derive(Debug)]
enum Probe {
    Fields(&'static [&'static str]),
    NotAStruct,
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("config key probe")
    }
}

impl std::error::Error for Probe {}

impl de::Error for Probe {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Probe::NotAStruct
    }
}

struct KeyProbe;

impl<'de> de::Deserializer<'de> for KeyProbe {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Probe> {
        Err(Probe::NotAStruct)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Probe> {
        Err(Probe::Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The field names of a struct config type, or `None` when `T` does not
/// deserialize as a plain struct (a map, or a struct with
/// `#[serde(flatten)]`), in which case the keys cannot be known up front.
pub fn config_keys<'de, T: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    match T::deserialize(KeyProbe) {
        Err(Probe::Fields(fields)) => Some(fields),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[allow(dead_code)]
    #[derive(Deserialize)]
    struct Config {
        allowed_tools: Option<Vec<String>>,
        #[serde(rename = "denied")]
        denied_tools: Option<Vec<String>>,
    }

    #[allow(dead_code)]
    #[derive(Deserialize)]
    struct Flattened {
        a: u8,
        #[serde(flatten)]
        rest: serde_json::Map<String, serde_json::Value>,
    }

    #[test]
    fn struct_fields_are_found_with_serde_names() {
        assert_eq!(config_keys::<Config>(), Some(&["allowed_tools", "denied"][..]));
    }

    #[test]
    fn maps_and_flattened_structs_have_no_fixed_keys() {
        assert_eq!(config_keys::<Flattened>(), None);
        assert_eq!(config_keys::<serde_json::Map<String, serde_json::Value>>(), None);
    }

    #[test]
    fn unit_struct_config_accepts_nothing() {
        #[derive(Deserialize)]
        struct NoConfig {}
        assert_eq!(config_keys::<NoConfig>(), Some(&[][..]));
    }
}
