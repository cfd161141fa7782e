//! The NDJSON sample's columns and the kinds of their values, read without
//! building a `serde_json::Value` per record.
//!
//! A record counts when `serde_json::from_slice::<Value>` would read it as
//! an object; then each key is a column (in order of first appearance) and
//! its value is noted for inference. A key given twice in one record counts
//! once, with its last value, as `Value`'s map keeps it. The record is read
//! by `serde_json`'s own parser, so it accepts what `Value` accepts: values
//! are visited with `deserialize_any` all the way down (strings are
//! unescaped and checked, lone surrogates refused, as for `Value`), and
//! nothing of a record is noted unless the whole record parses.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::values::{Inference, JsonKind};

/// Keys in order of first appearance, each with its inference.
#[derive(Default)]
pub(super) struct Columns {
    pub keys: Vec<String>,
    pub seen: Vec<Inference>,
    /// A key's place, for keys not where the line's order puts them.
    index: HashMap<String, usize>,
    /// The record being read: its keys' places (a new key by name) and
    /// the kind of each one's last value.
    record: Vec<(Slot, JsonKind)>,
}

#[derive(PartialEq)]
enum Slot {
    Known(usize),
    New(String),
}

impl Columns {
    /// Reads one record; a line that is not a JSON object adds nothing.
    pub fn add(&mut self, raw: &[u8]) {
        self.record.clear();
        let mut de = serde_json::Deserializer::from_slice(raw);
        if de.deserialize_map(&mut *self).is_err() || de.end().is_err() {
            return;
        }
        let raws = if crate::read::json::has_long_number(raw) {
            crate::read::json::raw_values(raw)
        } else {
            None
        };
        // Drained, not taken: the record's buffer serves the next one.
        for (slot, kind) in self.record.drain(..) {
            let i = match slot {
                Slot::Known(i) => i,
                Slot::New(k) => {
                    self.index.insert(k.clone(), self.keys.len());
                    self.keys.push(k);
                    self.seen.push(Inference::default());
                    self.keys.len() - 1
                }
            };
            let text = raws
                .as_ref()
                .and_then(|m| m.get(&self.keys[i]))
                .map(|r| r.get());
            self.seen[i].observe_kind(kind, text);
        }
    }

    /// The place of key `k`, the record's `at`-th key.
    fn slot(&self, k: &str, at: usize) -> Slot {
        if self.keys.get(at).is_some_and(|key| key == k) {
            Slot::Known(at)
        } else if let Some(&i) = self.index.get(k) {
            Slot::Known(i)
        } else {
            Slot::New(k.to_string())
        }
    }
}

impl<'de> Visitor<'de> for &mut Columns {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut at = 0;
        while let Some(slot) = map.next_key_seed(KeySeed(&*self, at))? {
            let kind = map.next_value_seed(Kind)?;
            // A key given twice keeps its first place and its last value.
            match self.record.iter_mut().find(|(s, _)| *s == slot) {
                Some(entry) => entry.1 = kind,
                None => self.record.push((slot, kind)),
            }
            at += 1;
        }
        Ok(())
    }
}

/// Reads a key as the column place it names.
struct KeySeed<'c>(&'c Columns, usize);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Slot;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Slot, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Slot;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, k: &str) -> Result<Slot, E> {
        Ok(self.0.slot(k, self.1))
    }
}

/// Reads any JSON value (checked as `Value` checks it) as its kind.
#[derive(Clone, Copy)]
struct Kind;

impl<'de> DeserializeSeed<'de> for Kind {
    type Value = JsonKind;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<JsonKind, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Kind {
    type Value = JsonKind;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<JsonKind, E> {
        Ok(JsonKind::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<JsonKind, E> {
        Ok(JsonKind::Bool)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<JsonKind, E> {
        Ok(JsonKind::Integer)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<JsonKind, E> {
        Ok(if i64::try_from(v).is_ok() {
            JsonKind::Integer
        } else {
            JsonKind::Float
        })
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<JsonKind, E> {
        // As `Value` reads it: a number that is not finite is null.
        Ok(if v.is_finite() {
            JsonKind::Float
        } else {
            JsonKind::Null
        })
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<JsonKind, E> {
        Ok(JsonKind::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonKind, A::Error> {
        while seq.next_element_seed(Kind)?.is_some() {}
        Ok(JsonKind::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonKind, A::Error> {
        while map.next_key_seed(Kind)?.is_some() {
            map.next_value_seed(Kind)?;
        }
        Ok(JsonKind::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::ColType;
    use proptest::prelude::*;
    use serde_json::Value as Json;

    /// Keys and types as reading each record into a `serde_json::Value`
    /// gives them (the reference).
    fn reference(lines: &[Vec<u8>]) -> (Vec<String>, Vec<ColType>) {
        let mut keys: Vec<String> = Vec::new();
        let mut by_key: HashMap<String, Inference> = HashMap::new();
        for b in lines {
            if let Ok(Json::Object(o)) = serde_json::from_slice(b) {
                let raws = if crate::read::json::has_long_number(b) {
                    crate::read::json::raw_values(b)
                } else {
                    None
                };
                for (k, v) in &o {
                    if !by_key.contains_key(k) {
                        keys.push(k.clone());
                    }
                    let text = raws.as_ref().and_then(|m| m.get(k)).map(|r| r.get());
                    by_key.entry(k.clone()).or_default().observe_json(v, text);
                }
            }
        }
        let types = keys.iter().map(|k| by_key[k].decide()).collect();
        (keys, types)
    }

    fn read(lines: &[Vec<u8>]) -> (Vec<String>, Vec<ColType>) {
        let mut c = Columns::default();
        for l in lines {
            c.add(l);
        }
        let types = c.seen.iter().map(Inference::decide).collect();
        (c.keys, types)
    }

    #[test]
    fn hostile_records_are_read_as_values_read_them() {
        let deep = |n: usize| format!(r#"{{"d":{}{}}}"#, "[".repeat(n), "]".repeat(n));
        let lines: Vec<&str> = vec![
            r#"{"a":1,"b":"x"}"#,
            r#"{"b":2.5,"a":2,"c":null}"#,
            r#"{"a":"\ud800","e":1}"#,
            r#"{"a":1,"a":"dup"}"#,
            r#"{"f":1,"f":2.5,"f":3}"#,
            r#"{"g":{"k":"\udc00"}}"#,
            r#"{"h":[1,{"x":"\u00e9"}]}"#,
            r#"{"i":123456789012345678901}"#,
            r#"{"j":18446744073709551615,"k":-9223372036854775808}"#,
            r#"{"l":1} x"#,
            r#"{"m":1,}"#,
            "[1,2]",
            "\"s\"",
            "not json",
            r#"{"n":tru}"#,
            r#"{"o":1e400}"#,
            r#"{"p":-0,"q":true}"#,
        ];
        let mut all: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
        all.push(deep(126).into_bytes());
        all.push(deep(127).into_bytes());
        all.push(deep(128).into_bytes());
        let got = read(&all);
        assert_eq!(got, reference(&all));
        // Not vacuous: the records above make columns of several types.
        assert!(got.0.len() >= 10, "{got:?}");
        assert!(got.1.contains(&ColType::Integer) && got.1.contains(&ColType::Real));
    }

    fn value() -> impl Strategy<Value = String> {
        let scalar = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| Json::from(v).to_string()),
            "[0-9]{19,25}",
            "\\PC{0,6}".prop_map(|s| Json::String(s).to_string()),
            Just(r#""\ud800""#.to_string()),
        ];
        scalar.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[a-c]", inner), 0..3).prop_map(|kv| {
                    let body: Vec<String> = kv
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        })
    }

    fn record() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(("[abAB]|[a-z]{2}", value()), 0..6),
            any::<prop::sample::Index>(),
            any::<u8>(),
            0u8..4,
        )
            .prop_map(|(kv, at, byte, how)| {
                let body: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                let mut line = format!("{{{}}}", body.join(",")).into_bytes();
                // Some records cut short or with a byte changed.
                match how {
                    0 => line.truncate(at.index(line.len() + 1)),
                    1 => {
                        let i = at.index(line.len());
                        line[i] = byte;
                    }
                    _ => {}
                }
                line
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random records (keys repeated, in changing order, some invalid)
        /// give the same columns and types as reading them into values.
        #[test]
        fn records_are_read_as_values_read_them(lines in prop::collection::vec(record(), 0..8)) {
            prop_assert_eq!(read(&lines), reference(&lines));
        }
    }
}
