//! The JSON paths a type reads, found by running its own `Deserialize` against a deserializer
//! that records what it is asked for: a struct names its fields (serde passes their list), a
//! map is given one entry (`*`), a list one item (`[]`), and every leaf asked for is recorded
//! (`.spec.nodeID`, `.status.instanceEngines.*`). So a field added to a model is in the set
//! with no list to keep by hand. What is read as a whole (`serde_json::Value`, `IgnoredAny`) is
//! one leaf at its path.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// The leaf paths `T` reads, each from the object's root (`.spec.nodeID`).
pub fn read_paths<T: DeserializeOwned>() -> BTreeSet<String> {
    let out = RefCell::new(BTreeSet::new());
    T::deserialize(Recorder { path: String::new(), out: &out, depth: 0 })
        .unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<T>()));
    out.into_inner()
}

#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

/// Deeper than any Longhorn object the guard reads: a recursive type stops here as a leaf.
const MAX_DEPTH: usize = 16;

struct Recorder<'a> {
    path: String,
    out: &'a RefCell<BTreeSet<String>>,
    depth: usize,
}

impl<'a> Recorder<'a> {
    fn child(&self, segment: &str) -> Self {
        Recorder { path: format!("{}{segment}", self.path), out: self.out, depth: self.depth + 1 }
    }

    fn leaf(&self) {
        self.out.borrow_mut().insert(if self.path.is_empty() { ".".into() } else { self.path.clone() });
    }
}

macro_rules! leaf {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.leaf();
            visitor.$visit($($value)?)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Recorder<'_> {
    type Error = Error;

    leaf! {
        deserialize_any => visit_unit(),
        deserialize_ignored_any => visit_unit(),
        deserialize_unit => visit_unit(),
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i8(0), deserialize_i16 => visit_i16(0), deserialize_i32 => visit_i32(0),
        deserialize_i64 => visit_i64(0), deserialize_u8 => visit_u8(0), deserialize_u16 => visit_u16(0),
        deserialize_u32 => visit_u32(0), deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f32(0.0), deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char(' '),
        deserialize_str => visit_str(""), deserialize_string => visit_str(""),
        deserialize_identifier => visit_str(""),
        deserialize_bytes => visit_bytes(b""), deserialize_byte_buf => visit_bytes(b""),
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.depth >= MAX_DEPTH {
            return self.deserialize_any(visitor);
        }
        visitor.visit_seq(One { item: Some(self.child("[]")) })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.depth >= MAX_DEPTH {
            return self.deserialize_any(visitor);
        }
        let value = self.child(".*");
        visitor.visit_map(Fields { keys: &["*"], values: vec![value].into_iter(), next: None })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if self.depth >= MAX_DEPTH {
            return self.deserialize_any(visitor);
        }
        let values: Vec<Recorder<'_>> = fields.iter().map(|f| self.child(&format!(".{f}"))).collect();
        visitor.visit_map(Fields { keys: fields, values: values.into_iter(), next: None })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!("{}: enum {name} is not read by path", self.path)))
    }
}

/// A list of one item.
struct One<'a> {
    item: Option<Recorder<'a>>,
}

impl<'de> SeqAccess<'de> for One<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        self.item.take().map(|r| seed.deserialize(r)).transpose()
    }
}

/// A struct's fields, or a map's one entry.
struct Fields<'a> {
    keys: &'static [&'static str],
    values: std::vec::IntoIter<Recorder<'a>>,
    next: Option<Recorder<'a>>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some((key, rest)) = self.keys.split_first() else { return Ok(None) };
        self.keys = rest;
        self.next = self.values.next();
        seed.deserialize((*key).into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let value = self.next.take().ok_or_else(|| de::Error::custom("a value before its key"))?;
        seed.deserialize(value)
    }
}
