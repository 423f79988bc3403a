//! [`Counters`]: named counters in the order the kernel printed them.
//!
//! Used for node `numastat`, `vmstat` and friends. The order is kept because tools that mirror the
//! kernel's files (numastat prints unknown names in file order) need it; lookups are linear, which is
//! faster than hashing for the 6 to 30 names these files hold. Serialized as a JSON object whose keys
//! keep file order.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Named counters in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    entries: Vec<(String, u64)>,
}

impl Counters {
    /// Appends a counter (a later duplicate name shadows nothing: `get` returns the first).
    pub fn push(&mut self, name: &str, value: u64) {
        self.entries.push((name.to_string(), value));
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.entries.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// All counters in file order.
    pub fn entries(&self) -> &[(String, u64)] {
        &self.entries
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl FromIterator<(String, u64)> for Counters {
    fn from_iter<I: IntoIterator<Item = (String, u64)>>(iter: I) -> Self {
        Counters { entries: iter.into_iter().collect() }
    }
}

impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Counters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counters;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of counter names to unsigned integers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Counters, A::Error> {
                let mut c = Counters::default();
                while let Some((k, v)) = map.next_entry::<String, u64>()? {
                    c.entries.push((k, v));
                }
                Ok(c)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_through_json() {
        let c: Counters = [("z".to_string(), 1), ("a".to_string(), 2)].into_iter().collect();
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(j, r#"{"z":1,"a":2}"#);
        let back: Counters = serde_json::from_str(&j).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.get("a"), Some(2));
        assert_eq!(back.get("q"), None);
    }
}
