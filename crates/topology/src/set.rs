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
//! An [`IdSet`] is a bitmap of `u64` words that keeps only its non-zero words, each with its
//! index, so a machine with more than 1024 CPUs (the size of glibc's fixed `cpu_set_t`) is no
//! special case, and a set's size follows its members, not its highest one: the SMT siblings
//! `{5, 32773}` of a 65,536-CPU machine are two words, where a plain bitmap up to the highest
//! member took 513 (4 KiB), and every CPU of the machine holds two such sets (its siblings and its
//! last-level cache): 0.8 GB for `numapilot topo` on the machine, 2.4 GB for the simulator.
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
///
/// Its non-zero 64-bit words with their indexes (word `w` holds ids `64 w .. 64 w + 63`), sorted
/// by index; no zero word is kept, so equal sets are equal values. Sets order as the plain
/// bitmaps did (words compared from the lowest, then the shorter first).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    words: Vec<(u32, u64)>,
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
        let mut words: Vec<(u32, u64)> = (0..n / 64).map(|w| (w, u64::MAX)).collect();
        if n % 64 != 0 {
            words.push((n / 64, (1u64 << (n % 64)) - 1));
        }
        Self { words }
    }

    /// Position of word `w` in `words`: `Ok` when present, else where it would go. A word in the
    /// first or the last run of consecutive words (all of a set of one or two runs: every CPU, a
    /// node's CPUs, SMT siblings, as Linux numbers x86 CPUs) or outside the set's range is found
    /// without a search.
    fn find(&self, w: u32) -> Result<usize, usize> {
        let (Some(&(lo, _)), Some(&(hi, _))) = (self.words.first(), self.words.last()) else { return Err(0) };
        if w < lo {
            return Err(0);
        }
        if w > hi {
            return Err(self.words.len());
        }
        let from_start = (w - lo) as usize;
        if self.words.get(from_start).is_some_and(|e| e.0 == w) {
            return Ok(from_start);
        }
        if let Some(from_end) = (self.words.len() - 1).checked_sub((hi - w) as usize) {
            if self.words[from_end].0 == w {
                return Ok(from_end);
            }
        }
        self.words.binary_search_by_key(&w, |e| e.0)
    }

    /// Word `w` of the bitmap (0 when absent).
    fn word(&self, w: u32) -> u64 {
        self.find(w).map_or(0, |i| self.words[i].1)
    }

    /// Adds `id`.
    pub fn insert(&mut self, id: u32) {
        let (w, bit) = (id / 64, 1u64 << (id % 64));
        // Ids in increasing order (parsing a list, collecting a sorted set) append.
        match self.words.last_mut() {
            None => self.words.push((w, bit)),
            Some(last) if last.0 == w => last.1 |= bit,
            Some(last) if last.0 < w => self.words.push((w, bit)),
            _ => match self.find(w) {
                Ok(i) => self.words[i].1 |= bit,
                Err(i) => self.words.insert(i, (w, bit)),
            },
        }
    }

    /// Removes `id` (no-op when absent).
    pub fn remove(&mut self, id: u32) {
        if let Ok(i) = self.find(id / 64) {
            self.words[i].1 &= !(1u64 << (id % 64));
            if self.words[i].1 == 0 {
                self.words.remove(i);
            }
        }
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: u32) -> bool {
        self.word(id / 64) & (1u64 << (id % 64)) != 0
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.1.count_ones() as usize).sum()
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The highest member, if any (named `last`, not `max`, so it never collides with `Ord::max`).
    pub fn last(&self) -> Option<u32> {
        self.words.last().map(|&(w, bits)| w * 64 + 63 - bits.leading_zeros())
    }

    /// The lowest member, if any (named `first`, not `min`, so it never collides with `Ord::min`).
    pub fn first(&self) -> Option<u32> {
        self.words.first().map(|&(w, bits)| w * 64 + bits.trailing_zeros())
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().flat_map(|&(wi, w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some(wi * 64 + b)
            })
        })
    }

    /// The words of `self` and `other` by index, in increasing order: `(index, self's, other's)`,
    /// 0 for a word one of them does not have.
    fn merged<'a>(&'a self, other: &'a Self) -> impl Iterator<Item = (u32, u64, u64)> + 'a {
        let (mut a, mut b) = (self.words.iter().peekable(), other.words.iter().peekable());
        std::iter::from_fn(move || match (a.peek().copied(), b.peek().copied()) {
            (None, None) => None,
            (Some(&(i, x)), None) => {
                a.next();
                Some((i, x, 0))
            }
            (None, Some(&(j, y))) => {
                b.next();
                Some((j, 0, y))
            }
            (Some(&(i, x)), Some(&(j, y))) => Some(match i.cmp(&j) {
                std::cmp::Ordering::Less => {
                    a.next();
                    (i, x, 0)
                }
                std::cmp::Ordering::Greater => {
                    b.next();
                    (j, 0, y)
                }
                std::cmp::Ordering::Equal => {
                    a.next();
                    b.next();
                    (i, x, y)
                }
            }),
        })
    }

    /// Set union.
    pub fn union(&self, other: &Self) -> Self {
        Self { words: self.merged(other).map(|(i, a, b)| (i, a | b)).collect() }
    }

    /// Set intersection (the smaller set's words, each looked up in the other: a CPU's siblings
    /// within all 65,536 CPUs costs two lookups, not a walk over 1,024 words).
    pub fn intersection(&self, other: &Self) -> Self {
        let (small, large) = if self.words.len() <= other.words.len() { (self, other) } else { (other, self) };
        Self { words: small.words.iter().map(|&(i, a)| (i, a & large.word(i))).filter(|w| w.1 != 0).collect() }
    }

    /// Members of `self` not in `other` (each word of `self` looked up in `other`).
    pub fn difference(&self, other: &Self) -> Self {
        Self { words: self.words.iter().map(|&(i, a)| (i, a & !other.word(i))).filter(|w| w.1 != 0).collect() }
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.words.iter().all(|&(i, a)| a & !other.word(i) == 0)
    }

    /// The bitmap as 64-bit words, least significant first, up to the highest member: bit `i % 64`
    /// of word `i / 64` is id `i`. This is the layout `sched_setaffinity`, `set_mempolicy` and
    /// `mbind` take on 64-bit Linux.
    pub fn to_words(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.words.last().map_or(0, |w| w.0 as usize + 1)];
        for &(i, w) in &self.words {
            out[i as usize] = w;
        }
        out
    }

    /// How many 64-bit words the set keeps (16 bytes each, with their indexes): what it costs in
    /// memory, which follows its members, not its highest one.
    pub fn stored_words(&self) -> usize {
        self.words.len()
    }

    /// Builds a set from 64-bit words, least significant first.
    pub fn from_words(words: &[u64]) -> Self {
        Self { words: words.iter().enumerate().filter(|w| *w.1 != 0).map(|(i, &w)| (i as u32, w)).collect() }
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
                let w64 = self.word((i / 2) as u32);
                let w32 = if i % 2 == 0 { w64 as u32 } else { (w64 >> 32) as u32 };
                format!("{w32:08x}")
            })
            .collect::<Vec<_>>()
            .join(",")
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

impl Ord for IdSet {
    /// As the plain bitmaps (`Vec<u64>` up to the highest member) compared: word by word from the
    /// lowest, the first that differs decides, else the shorter bitmap is the smaller.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let len = |s: &Self| s.words.last().map_or(0, |w| u64::from(w.0) + 1);
        let (la, lb) = (len(self), len(other));
        for (i, a, b) in self.merged(other) {
            if u64::from(i) >= la.min(lb) {
                break;
            }
            if a != b {
                return a.cmp(&b);
            }
        }
        la.cmp(&lb)
    }
}

impl PartialOrd for IdSet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
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
        assert_eq!(s.to_words().len(), 64);
        assert!(s.contains(1501));
        assert_eq!(IdSet::from_words(&s.to_words()), s);
    }

    #[test]
    fn a_set_keeps_only_its_words() {
        // The SMT siblings of a 65,536-CPU machine numbered as Linux numbers x86 CPUs: two words,
        // not a bitmap up to CPU 65,535 (1,024 words).
        let s: IdSet = [5, 32773].into_iter().collect();
        assert_eq!(s.words.len(), 2);
        assert_eq!(IdSet::parse_list("65535").unwrap().words.len(), 1);
        let all = IdSet::first_n(65536);
        assert_eq!((all.len(), all.words.len()), (65536, 1024));
        assert_eq!(all.intersection(&s).words.len(), 2);
        assert_eq!(s.to_words().len(), 513);
    }

    /// The order of plain bitmaps: lexicographic over the words up to the highest member.
    fn dense_cmp(a: &IdSet, b: &IdSet) -> std::cmp::Ordering {
        a.to_words().cmp(&b.to_words())
    }

    proptest! {
        #[test]
        fn orders_as_plain_bitmaps(a in proptest::collection::btree_set(0u32..400, 0..12),
                                   b in proptest::collection::btree_set(0u32..400, 0..12)) {
            let (sa, sb): (IdSet, IdSet) = (a.iter().copied().collect(), b.iter().copied().collect());
            prop_assert_eq!(sa.cmp(&sb), dense_cmp(&sa, &sb));
            prop_assert_eq!(sa.cmp(&sa), std::cmp::Ordering::Equal);
        }

        #[test]
        fn insert_remove_contains(ops in proptest::collection::vec((0u32..1000, proptest::bool::ANY), 0..80)) {
            let mut set = IdSet::new();
            let mut model = std::collections::BTreeSet::new();
            for (id, add) in ops {
                if add {
                    set.insert(id);
                    model.insert(id);
                } else {
                    set.remove(id);
                    model.remove(&id);
                }
                prop_assert_eq!(set.contains(id), model.contains(&id));
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(set.first(), model.first().copied());
            prop_assert_eq!(set.last(), model.last().copied());
            prop_assert_eq!(set.len(), model.len());
            prop_assert!(set.words.iter().all(|w| w.1 != 0), "no zero word is kept");
            prop_assert_eq!(IdSet::from_words(&set.to_words()), set.clone());
        }

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
            prop_assert_eq!(sa.is_subset(&sb), a.is_subset(&b));
        }
    }
}
