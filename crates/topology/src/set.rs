//! Sets of CPU or node ids, of any size.
//!
//! The kernel speaks about sets of CPUs and nodes in two text forms, and we need both:
//!
//! ```text
//!   list form  "0-3,8,10-11"            sysfs cpulist, /proc/PID/status Cpus_allowed_list
//!   mask form  "00000000,00000d0f"      /proc/PID/status Cpus_allowed, sysfs cpumap
//!               ^ most significant 32-bit word first, comma between words
//! ```
//!
//! An [`IdSet`] is a growable bitmap of `u64` words, so a machine with more than 1024 CPUs (the size
//! of glibc's fixed `cpu_set_t`) is no special case: the set is as wide as its highest member.
//! [`CpuSet`] and [`NodeSet`] are the same type under two names; the name says which id space a
//! value lives in. Node ids are the kernel's (sparse: nodes 0 and 8 is a legal machine), never
//! dense indexes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `" in \"input\""` when the token is only part of the input (a lone token is not quoted twice).
fn within(token: &str, input: &str) -> String {
    if token == input {
        String::new()
    } else {
        format!(" in {input:?}")
    }
}

/// Why a list or mask string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetParseError {
    /// A token that is not a number or range, e.g. `"3-"` or `"x"`.
    #[error("bad id or range {token:?}{}", within(token, input))]
    BadToken {
        /// The offending token.
        token: String,
        /// The whole input.
        input: String,
    },
    /// A range whose end is before its start, e.g. `"5-2"`.
    #[error("range {token:?} runs backwards{}", within(token, input))]
    Backwards {
        /// The offending token.
        token: String,
        /// The whole input.
        input: String,
    },
    /// An id above [`IdSet::MAX_ID`].
    #[error("id {id} in {input:?} is larger than the supported maximum {max}")]
    TooLarge {
        /// The offending id.
        id: u64,
        /// The whole input.
        input: String,
        /// The limit.
        max: u32,
    },
    /// A mask word that is not hexadecimal.
    #[error("bad mask word {token:?} in {input:?}")]
    BadMaskWord {
        /// The offending word.
        token: String,
        /// The whole input.
        input: String,
    },
}

/// A set of small non-negative ids (CPU numbers or node ids), as a bitmap.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdSet {
    words: Vec<u64>,
}

/// A set of CPU numbers (kernel logical CPU ids).
pub type CpuSet = IdSet;
/// A set of NUMA node ids (kernel ids, possibly sparse).
pub type NodeSet = IdSet;

impl IdSet {
    /// The largest id accepted from text: the kernel's NR_CPUS ceiling is 8192 on x86 (CONFIG_MAXSMP),
    /// and MAX_NUMNODES is at most 1024; 65535 leaves room without letting a typo allocate gigabytes.
    pub const MAX_ID: u32 = 65_535;

    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set `{0, 1, ..., n-1}`.
    pub fn first_n(n: u32) -> Self {
        let mut s = Self::new();
        for i in 0..n {
            s.insert(i);
        }
        s
    }

    /// Adds `id`.
    pub fn insert(&mut self, id: u32) {
        let w = (id / 64) as usize;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1u64 << (id % 64);
    }

    /// Removes `id` (no-op when absent).
    pub fn remove(&mut self, id: u32) {
        let w = (id / 64) as usize;
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1u64 << (id % 64));
        }
        self.trim();
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: u32) -> bool {
        self.words.get((id / 64) as usize).is_some_and(|w| w & (1u64 << (id % 64)) != 0)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The highest member, if any (named `last`, not `max`, so it never collides with `Ord::max`).
    pub fn last(&self) -> Option<u32> {
        self.iter().last()
    }

    /// The lowest member, if any (named `first`, not `min`, so it never collides with `Ord::min`).
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some(wi as u32 * 64 + b)
            })
        })
    }

    /// Set union.
    pub fn union(&self, other: &Self) -> Self {
        let n = self.words.len().max(other.words.len());
        let words = (0..n)
            .map(|i| self.words.get(i).copied().unwrap_or(0) | other.words.get(i).copied().unwrap_or(0))
            .collect();
        let mut s = Self { words };
        s.trim();
        s
    }

    /// Set intersection.
    pub fn intersection(&self, other: &Self) -> Self {
        let words = self.words.iter().zip(&other.words).map(|(a, b)| a & b).collect();
        let mut s = Self { words };
        s.trim();
        s
    }

    /// Members of `self` not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        let words = self.words.iter().enumerate().map(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0)).collect();
        let mut s = Self { words };
        s.trim();
        s
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.difference(other).is_empty()
    }

    /// The bitmap as 64-bit words, least significant first: bit `i % 64` of word `i / 64` is id `i`.
    /// This is the layout `sched_setaffinity`, `set_mempolicy` and `mbind` take on 64-bit Linux.
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// Builds a set from 64-bit words, least significant first.
    pub fn from_words(words: &[u64]) -> Self {
        let mut s = Self { words: words.to_vec() };
        s.trim();
        s
    }

    /// Parses the kernel's list form: `"0-3,8,10-11"`; empty or whitespace-only input is the empty set.
    /// Also accepts the stride form the kernel's `bitmap_parselist` takes (`"0-15:2/4"`: in each group
    /// of 4 starting at 0, the first 2).
    pub fn parse_list(input: &str) -> Result<Self, SetParseError> {
        let mut set = Self::new();
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Ok(set);
        }
        let bad = |tok: &str| SetParseError::BadToken { token: tok.to_string(), input: input.to_string() };
        for tok in trimmed.split(',') {
            let tok = tok.trim();
            let (range, stride) = match tok.split_once(':') {
                Some((r, s)) => {
                    let (used, group) = s.split_once('/').ok_or_else(|| bad(tok))?;
                    let used: u32 = used.parse().map_err(|_| bad(tok))?;
                    let group: u32 = group.parse().map_err(|_| bad(tok))?;
                    if group == 0 || used == 0 || used > group {
                        return Err(bad(tok));
                    }
                    (r, Some((used, group)))
                }
                None => (tok, None),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_id(a, tok, input)?, parse_id(b, tok, input)?),
                None => {
                    let v = parse_id(range, tok, input)?;
                    (v, v)
                }
            };
            if hi < lo {
                return Err(SetParseError::Backwards { token: tok.to_string(), input: input.to_string() });
            }
            for id in lo..=hi {
                match stride {
                    Some((used, group)) if (id - lo) % group >= used => {}
                    _ => set.insert(id),
                }
            }
        }
        Ok(set)
    }

    /// Parses the kernel's mask form: comma-separated 32-bit hex words, most significant first
    /// (`"00000000,0000000f"` is `{0,1,2,3}`), as in `Cpus_allowed:` of /proc/PID/status.
    pub fn parse_mask(input: &str) -> Result<Self, SetParseError> {
        let trimmed = input.trim();
        let mut set = Self::new();
        if trimmed.is_empty() {
            return Ok(set);
        }
        let words: Vec<&str> = trimmed.split(',').collect();
        for (i, word) in words.iter().rev().enumerate() {
            let word = word.trim();
            if word.is_empty() || word.len() > 8 {
                return Err(SetParseError::BadMaskWord { token: word.to_string(), input: input.to_string() });
            }
            let v = u32::from_str_radix(word, 16)
                .map_err(|_| SetParseError::BadMaskWord { token: word.to_string(), input: input.to_string() })?;
            for b in 0..32 {
                if v & (1 << b) != 0 {
                    let id = i as u64 * 32 + b;
                    if id > u64::from(Self::MAX_ID) {
                        return Err(SetParseError::TooLarge { id, input: input.to_string(), max: Self::MAX_ID });
                    }
                    set.insert(id as u32);
                }
            }
        }
        Ok(set)
    }

    /// [`IdSet::to_list`], with `none` for the empty set (for messages and logs, where an empty
    /// string would read as a missing value).
    pub fn to_list_or_none(&self) -> String {
        if self.is_empty() {
            "none".into()
        } else {
            self.to_list()
        }
    }

    /// Formats in the kernel's list form (`"0-3,8"`); the empty set is `""`.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.iter().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if end == start {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }

    /// Formats as space-separated ids, as `numactl --hardware` prints a node's CPUs (`"0 1 2 3"`).
    pub fn to_spaced(&self) -> String {
        self.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(" ")
    }

    /// Formats in the kernel's mask form, with at least `min_words` 32-bit words.
    pub fn to_mask(&self, min_words: usize) -> String {
        let nwords = self.last().map_or(0, |m| m as usize / 32 + 1).max(min_words).max(1);
        (0..nwords)
            .rev()
            .map(|i| {
                let w64 = self.words.get(i / 2).copied().unwrap_or(0);
                let w32 = if i % 2 == 0 { w64 as u32 } else { (w64 >> 32) as u32 };
                format!("{w32:08x}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

fn parse_id(s: &str, tok: &str, input: &str) -> Result<u32, SetParseError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SetParseError::BadToken { token: tok.to_string(), input: input.to_string() });
    }
    let v: u64 = s.parse().map_err(|_| SetParseError::TooLarge {
        id: u64::MAX,
        input: input.to_string(),
        max: IdSet::MAX_ID,
    })?;
    if v > u64::from(IdSet::MAX_ID) {
        return Err(SetParseError::TooLarge { id: v, input: input.to_string(), max: IdSet::MAX_ID });
    }
    Ok(v as u32)
}

impl FromIterator<u32> for IdSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut s = Self::new();
        for i in iter {
            s.insert(i);
        }
        s
    }
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.to_list())
    }
}

impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl Serialize for IdSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

impl<'de> Deserialize<'de> for IdSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IdSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn list_round_trip_and_forms() {
        let s = IdSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert_eq!(s.to_spaced(), "0 1 2 3 8 10 11");
        assert_eq!(IdSet::parse_list("\n").unwrap(), IdSet::new());
        assert_eq!(IdSet::parse_list("0-7:2/4").unwrap().to_list(), "0-1,4-5");
    }

    #[test]
    fn list_rejects_bad_tokens_naming_them() {
        let e = IdSet::parse_list("0-3,x").unwrap_err();
        assert_eq!(e.to_string(), "bad id or range \"x\" in \"0-3,x\"");
        // A token that is the whole input is quoted once.
        assert_eq!(IdSet::parse_list("0-zz").unwrap_err().to_string(), "bad id or range \"0-zz\"");
        assert_eq!(IdSet::parse_list("5-1").unwrap_err().to_string(), "range \"5-1\" runs backwards");
        assert!(matches!(IdSet::parse_list("5-2"), Err(SetParseError::Backwards { .. })));
        assert!(matches!(IdSet::parse_list("3-"), Err(SetParseError::BadToken { .. })));
        assert!(matches!(IdSet::parse_list("99999999"), Err(SetParseError::TooLarge { .. })));
        assert!(matches!(IdSet::parse_list("-1"), Err(SetParseError::BadToken { .. })));
    }

    #[test]
    fn mask_form_matches_kernel_layout() {
        let s = IdSet::parse_mask("00000001,0000000f").unwrap();
        assert_eq!(s.to_list(), "0-3,32");
        assert_eq!(s.to_mask(2), "00000001,0000000f");
        assert_eq!(IdSet::parse_list("0-1").unwrap().to_mask(1), "00000003");
        assert!(IdSet::parse_mask("zz").is_err());
    }

    #[test]
    fn above_1024_cpus() {
        let s = IdSet::parse_list("0,1500-1501,4095").unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s.as_words().len(), 64);
        assert!(s.contains(1501));
        assert_eq!(IdSet::from_words(s.as_words()), s);
    }

    proptest! {
        #[test]
        fn list_and_mask_round_trip(ids in proptest::collection::btree_set(0u32..3000, 0..64)) {
            let s: IdSet = ids.iter().copied().collect();
            prop_assert_eq!(IdSet::parse_list(&s.to_list()).unwrap(), s.clone());
            prop_assert_eq!(IdSet::parse_mask(&s.to_mask(1)).unwrap(), s.clone());
            prop_assert_eq!(s.len(), ids.len());
        }

        #[test]
        fn set_algebra(a in proptest::collection::btree_set(0u32..300, 0..40),
                       b in proptest::collection::btree_set(0u32..300, 0..40)) {
            let sa: IdSet = a.iter().copied().collect();
            let sb: IdSet = b.iter().copied().collect();
            let u: IdSet = a.union(&b).copied().collect();
            let i: IdSet = a.intersection(&b).copied().collect();
            let d: IdSet = a.difference(&b).copied().collect();
            prop_assert_eq!(sa.union(&sb), u);
            prop_assert_eq!(sa.intersection(&sb), i.clone());
            prop_assert_eq!(sa.difference(&sb), d);
            prop_assert!(i.is_subset(&sa));
        }
    }
}
