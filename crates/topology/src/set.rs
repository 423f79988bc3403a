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
//! An [`IdSet`] is a bitmap of `u64` words, so a machine with more than 1024 CPUs (the size of
//! glibc's fixed `cpu_set_t`) is no special case, and its size follows its members, not its
//! highest one: a set at least half of whose words between its lowest and highest member are
//! in use keeps those words (a node's CPUs, every CPU: a member is found by indexing), a sparser
//! one keeps only its non-zero words, each with its index. The SMT siblings `{5, 32773}` of a
//! 65,536-CPU machine (Linux numbers x86 CPUs so) are two words; as a bitmap up to the highest
//! member they took 513 (4 KiB), and every CPU of the machine holds two such sets (its siblings
//! and its last-level cache): 0.8 GB for `numapilot topo` on the machine, 2.4 GB for the simulator.
//! A set can also be shared ([`IdSet::shared`]): it and its clones then hold one copy of the words,
//! as the CPUs of one cache or core hold its set (machine files and sysfs are read so), and a
//! change to one of them copies the words first.
//! [`CpuSet`] and [`NodeSet`] are the same type under two names; the name says which id space a
//! value lives in. Node ids are the kernel's (sparse: nodes 0 and 8 is a legal machine), never
//! dense indexes.

use std::fmt;
use std::sync::Arc;

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

/// A set of small non-negative ids (CPU numbers or node ids), as a bitmap (see the module
/// essay for its two forms; equal sets are equal whatever their form). Sets order as the plain
/// bitmaps did (words compared from the lowest, then the shorter first).
#[derive(Clone)]
pub struct IdSet {
    store: Store,
}

/// Who holds a set's words.
#[derive(Clone)]
enum Store {
    /// The set itself.
    Own(Repr),
    /// One copy for the set and all its clones (see [`IdSet::shared`]); a change to one of them
    /// copies the words first.
    Shared(Arc<Repr>),
}

#[derive(Clone)]
enum Repr {
    /// Words `base .. base + words.len()` (word `w` holds ids `64 w .. 64 w + 63`); the first and
    /// the last are not zero.
    Dense { base: u32, words: Vec<u64> },
    /// The non-zero words with their indexes, sorted by index.
    Sparse(Vec<(u32, u64)>),
}

impl Default for IdSet {
    fn default() -> Self {
        Self::of(Repr::Sparse(Vec::new()))
    }
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
        let mut words = vec![u64::MAX; (n / 64) as usize];
        if n % 64 != 0 {
            words.push((1u64 << (n % 64)) - 1);
        }
        Self::dense(0, words)
    }

    /// A set of its own words.
    fn of(repr: Repr) -> Self {
        Self { store: Store::Own(repr) }
    }

    fn repr(&self) -> &Repr {
        match &self.store {
            Store::Own(r) => r,
            Store::Shared(r) => r,
        }
    }

    /// The words to change, copied first when shared.
    fn repr_mut(&mut self) -> &mut Repr {
        if let Store::Shared(r) = &self.store {
            self.store = Store::Own(Repr::clone(r));
        }
        match &mut self.store {
            Store::Own(r) => r,
            Store::Shared(_) => unreachable!("copied above"),
        }
    }

    /// The same set, its words held once for it and all its clones: a clone costs a reference,
    /// not a copy (the last-level cache set each CPU of the cache holds, its SMT siblings). A
    /// change to one of them copies the words first, so each still behaves as a set of its own.
    pub fn shared(self) -> Self {
        match self.store {
            Store::Own(r) => Self { store: Store::Shared(Arc::new(r)) },
            shared => Self { store: shared },
        }
    }

    /// Where the words are, to tell shared copies from separate ones.
    #[cfg(test)]
    pub(crate) fn words_at(&self) -> *const () {
        match &self.store {
            Store::Own(Repr::Dense { words, .. }) => words.as_ptr().cast(),
            Store::Own(Repr::Sparse(v)) => v.as_ptr().cast(),
            Store::Shared(r) => Arc::as_ptr(r).cast(),
        }
    }

    /// Words from `base`, trimmed of zero words at both ends.
    fn dense(mut base: u32, mut words: Vec<u64>) -> Self {
        while words.last() == Some(&0) {
            words.pop();
        }
        let lead = words.iter().take_while(|w| **w == 0).count();
        if lead > 0 {
            words.drain(..lead);
            base += lead as u32;
        }
        Self::of(Repr::Dense { base, words })
    }

    /// The set of these words (non-zero, increasing indexes) in the form that suits them.
    fn from_pairs(pairs: Vec<(u32, u64)>) -> Self {
        let (Some(&(lo, _)), Some(&(hi, _))) = (pairs.first(), pairs.last()) else { return Self::new() };
        let span = (hi - lo) as usize + 1;
        if span > 2 * pairs.len() {
            return Self::of(Repr::Sparse(pairs));
        }
        let mut words = vec![0u64; span];
        for (i, w) in pairs {
            words[(i - lo) as usize] = w;
        }
        Self::of(Repr::Dense { base: lo, words })
    }

    /// The non-zero words with their indexes, in increasing order.
    fn pairs(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let (dense, sparse) = match self.repr() {
            Repr::Dense { base, words } => (Some((*base, words)), None),
            Repr::Sparse(v) => (None, Some(v)),
        };
        let d = dense
            .into_iter()
            .flat_map(|(base, words)| words.iter().enumerate().map(move |(i, &w)| (base + i as u32, w)));
        d.chain(sparse.into_iter().flatten().copied()).filter(|p| p.1 != 0)
    }

    /// Word `w` of the bitmap (0 when absent): an index into a dense set, a search in a sparse one.
    fn word(&self, w: u32) -> u64 {
        match self.repr() {
            Repr::Dense { base, words } => {
                w.checked_sub(*base).and_then(|i| words.get(i as usize)).copied().unwrap_or(0)
            }
            Repr::Sparse(v) => sparse_find(v, w).map_or(0, |i| v[i].1),
        }
    }

    /// Adds `id`.
    pub fn insert(&mut self, id: u32) {
        let (w, bit) = (id / 64, 1u64 << (id % 64));
        match self.repr_mut() {
            Repr::Dense { base, words } if !words.is_empty() => {
                let end = *base + words.len() as u32;
                if (*base..end).contains(&w) {
                    words[(w - *base) as usize] |= bit;
                    return;
                }
                // Ids in increasing order (parsing a list, collecting a sorted set) append; a
                // word close enough keeps the set dense (at most doubling its words).
                let (lo, hi) = (w.min(*base), (w + 1).max(end));
                if (hi - lo) as usize <= 2 * words.len() + 1 {
                    if w >= end {
                        words.resize((w - *base) as usize, 0);
                        words.push(bit);
                    } else {
                        let mut grown = vec![0u64; (*base - w) as usize];
                        grown[0] = bit;
                        grown.extend_from_slice(words);
                        *words = grown;
                        *base = w;
                    }
                    return;
                }
                let mut pairs: Vec<(u32, u64)> = self.pairs().collect();
                let at = pairs.partition_point(|e| e.0 < w);
                pairs.insert(at, (w, bit));
                *self = Self::of(Repr::Sparse(pairs));
            }
            Repr::Dense { .. } => *self = Self::of(Repr::Dense { base: w, words: vec![bit] }),
            Repr::Sparse(v) if v.is_empty() => *self = Self::of(Repr::Dense { base: w, words: vec![bit] }),
            Repr::Sparse(v) => match sparse_find(v, w) {
                Ok(i) => v[i].1 |= bit,
                Err(i) => v.insert(i, (w, bit)),
            },
        }
    }

    /// Adds `lo..=hi` a word at a time (a range of 65,536 CPUs is 1,024 words, not 65,536 inserts).
    fn insert_range(&mut self, lo: u32, hi: u32) {
        let (wl, wh) = (lo / 64, hi / 64);
        let mut words = vec![u64::MAX; (wh - wl + 1) as usize];
        words[0] &= u64::MAX << (lo % 64);
        *words.last_mut().expect("one word at least") &= u64::MAX >> (63 - hi % 64);
        let range = Self::of(Repr::Dense { base: wl, words });
        *self = if self.is_empty() { range } else { self.union(&range) };
    }

    /// The members as ranges `(first, last)` of consecutive ids, in increasing order, found a
    /// word at a time.
    fn ranges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut pairs = self.pairs();
        let (mut bits, mut at) = (0u64, 0u32);
        let mut open: Option<(u32, u32)> = None;
        std::iter::from_fn(move || loop {
            if bits == 0 {
                match pairs.next() {
                    Some((w, b)) => (bits, at) = (b, w * 64),
                    None => return open.take(),
                }
            }
            let skip = bits.trailing_zeros();
            let (bits_from, start) = (bits >> skip, at + skip);
            let ones = bits_from.trailing_ones();
            let end = start + ones - 1;
            (bits, at) = if skip + ones >= 64 { (0, at + 64) } else { (bits_from >> ones << (skip + ones), at) };
            match open {
                Some((a, e)) if e + 1 == start => open = Some((a, end)),
                Some(done) => {
                    open = Some((start, end));
                    return Some(done);
                }
                None => open = Some((start, end)),
            }
        })
    }

    /// Removes `id` (no-op when absent).
    pub fn remove(&mut self, id: u32) {
        let (w, bit) = (id / 64, 1u64 << (id % 64));
        match self.repr_mut() {
            Repr::Dense { base, words } => {
                if let Some(word) = w.checked_sub(*base).and_then(|i| words.get_mut(i as usize)) {
                    *word &= !bit;
                    let (b, ws) = (*base, std::mem::take(words));
                    *self = Self::dense(b, ws);
                }
            }
            Repr::Sparse(v) => {
                if let Ok(i) = sparse_find(v, w) {
                    v[i].1 &= !bit;
                    if v[i].1 == 0 {
                        v.remove(i);
                    }
                }
            }
        }
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: u32) -> bool {
        self.word(id / 64) & (1u64 << (id % 64)) != 0
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.pairs().map(|w| w.1.count_ones() as usize).sum()
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        match self.repr() {
            Repr::Dense { words, .. } => words.is_empty(),
            Repr::Sparse(v) => v.is_empty(),
        }
    }

    /// The highest member, if any (named `last`, not `max`, so it never collides with `Ord::max`).
    pub fn last(&self) -> Option<u32> {
        let last = match self.repr() {
            Repr::Dense { base, words } => words.last().map(|&w| (*base + words.len() as u32 - 1, w)),
            Repr::Sparse(v) => v.last().copied(),
        };
        last.map(|(w, bits)| w * 64 + 63 - bits.leading_zeros())
    }

    /// The lowest member, if any (named `first`, not `min`, so it never collides with `Ord::min`).
    pub fn first(&self) -> Option<u32> {
        self.pairs().next().map(|(w, bits)| w * 64 + bits.trailing_zeros())
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.pairs().flat_map(|(wi, w)| {
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
        let (mut a, mut b) = (self.pairs().peekable(), other.pairs().peekable());
        std::iter::from_fn(move || match (a.peek().copied(), b.peek().copied()) {
            (None, None) => None,
            (Some((i, x)), None) => {
                a.next();
                Some((i, x, 0))
            }
            (None, Some((j, y))) => {
                b.next();
                Some((j, 0, y))
            }
            (Some((i, x)), Some((j, y))) => Some(match i.cmp(&j) {
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

    /// The words a dense set keeps, from its base.
    fn dense_words(&self) -> Option<(u32, &[u64])> {
        match self.repr() {
            Repr::Dense { base, words } => Some((*base, words)),
            Repr::Sparse(_) => None,
        }
    }

    /// Set union.
    pub fn union(&self, other: &Self) -> Self {
        if let (Some((ba, wa)), Some((bb, wb))) = (self.dense_words(), other.dense_words()) {
            if wa.is_empty() || wb.is_empty() {
                return if wa.is_empty() { other.clone() } else { self.clone() };
            }
            let (lo, hi) = (ba.min(bb), (ba + wa.len() as u32).max(bb + wb.len() as u32));
            if (hi - lo) as usize <= 2 * (wa.len() + wb.len()) {
                let mut words = vec![0u64; (hi - lo) as usize];
                for (base, ws) in [(ba, wa), (bb, wb)] {
                    for (i, w) in ws.iter().enumerate() {
                        words[(base - lo) as usize + i] |= w;
                    }
                }
                return Self::dense(lo, words);
            }
        }
        Self::from_pairs(self.merged(other).map(|(i, a, b)| (i, a | b)).collect())
    }

    /// Set intersection (the smaller set's words, each looked up in the other: a CPU's siblings
    /// within all 65,536 CPUs costs two lookups, not a walk over 1,024 words).
    pub fn intersection(&self, other: &Self) -> Self {
        if let (Some((ba, wa)), Some((bb, wb))) = (self.dense_words(), other.dense_words()) {
            let (lo, hi) = (ba.max(bb), (ba + wa.len() as u32).min(bb + wb.len() as u32));
            let words = (lo..hi.max(lo)).map(|w| wa[(w - ba) as usize] & wb[(w - bb) as usize]).collect();
            return Self::dense(lo, words);
        }
        let (small, large) = if self.stored_words() <= other.stored_words() { (self, other) } else { (other, self) };
        Self::from_pairs(small.pairs().map(|(i, a)| (i, a & large.word(i))).filter(|w| w.1 != 0).collect())
    }

    /// Members of `self` not in `other` (each word of `self` looked up in `other`).
    pub fn difference(&self, other: &Self) -> Self {
        if let Some((base, words)) = self.dense_words() {
            let words = words.iter().enumerate().map(|(i, &w)| w & !other.word(base + i as u32)).collect();
            return Self::dense(base, words);
        }
        Self::from_pairs(self.pairs().map(|(i, a)| (i, a & !other.word(i))).filter(|w| w.1 != 0).collect())
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.pairs().all(|(i, a)| a & !other.word(i) == 0)
    }

    /// The bitmap as 64-bit words, least significant first, up to the highest member: bit `i % 64`
    /// of word `i / 64` is id `i`. This is the layout `sched_setaffinity`, `set_mempolicy` and
    /// `mbind` take on 64-bit Linux.
    pub fn to_words(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.last().map_or(0, |id| (id / 64) as usize + 1)];
        for (i, w) in self.pairs() {
            out[i as usize] = w;
        }
        out
    }

    /// How many 64-bit words the set keeps (a sparse one keeps each with its index): what it
    /// costs in memory, which follows its members, not its highest one.
    pub fn stored_words(&self) -> usize {
        match self.repr() {
            Repr::Dense { words, .. } => words.len(),
            Repr::Sparse(v) => v.len(),
        }
    }

    /// Builds a set from 64-bit words, least significant first.
    pub fn from_words(words: &[u64]) -> Self {
        Self::dense(0, words.to_vec())
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
            match stride {
                None => set.insert_range(lo, hi),
                Some((used, group)) => {
                    for id in (lo..=hi).filter(|id| (id - lo) % group < used) {
                        set.insert(id);
                    }
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
        for (start, end) in self.ranges() {
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

/// Position of word `w` in sparse words `v`: `Ok` when present, else where it would go. A word
/// outside the set's range, or in its first or last run of consecutive words (all of a set of two
/// runs, as a node's CPUs are when Linux numbers x86 SMT siblings half a machine apart), is found
/// without a search.
fn sparse_find(v: &[(u32, u64)], w: u32) -> Result<usize, usize> {
    let (Some(&(lo, _)), Some(&(hi, _))) = (v.first(), v.last()) else { return Err(0) };
    if w < lo {
        return Err(0);
    }
    if w > hi {
        return Err(v.len());
    }
    let from_start = (w - lo) as usize;
    if v.get(from_start).is_some_and(|e| e.0 == w) {
        return Ok(from_start);
    }
    if let Some(from_end) = (v.len() - 1).checked_sub((hi - w) as usize) {
        if v[from_end].0 == w {
            return Ok(from_end);
        }
    }
    v.binary_search_by_key(&w, |e| e.0)
}

impl FromIterator<u32> for IdSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut ids: Vec<u32> = iter.into_iter().collect();
        // In increasing order every insert appends.
        if !ids.is_sorted() {
            ids.sort_unstable();
        }
        let mut s = Self::new();
        for i in ids {
            s.insert(i);
        }
        s
    }
}

impl PartialEq for IdSet {
    fn eq(&self, other: &Self) -> bool {
        if let (Store::Shared(a), Store::Shared(b)) = (&self.store, &other.store) {
            if Arc::ptr_eq(a, b) {
                return true;
            }
        }
        match (self.repr(), other.repr()) {
            // Both forms keep no zero word at their ends: equal sets keep the same words.
            (Repr::Dense { base: a, words: x }, Repr::Dense { base: b, words: y }) => (a, x) == (b, y),
            (Repr::Sparse(x), Repr::Sparse(y)) => x == y,
            _ => self.pairs().eq(other.pairs()),
        }
    }
}

impl Eq for IdSet {}

impl std::hash::Hash for IdSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for (i, w) in self.pairs() {
            state.write_u32(i);
            state.write_u64(w);
        }
    }
}

impl Ord for IdSet {
    /// As the plain bitmaps (`Vec<u64>` up to the highest member) compared: word by word from the
    /// lowest, the first that differs decides, else the shorter bitmap is the smaller.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if let (Repr::Dense { base: a, words: x }, Repr::Dense { base: b, words: y }) = (self.repr(), other.repr()) {
            if !x.is_empty() && !y.is_empty() {
                // The lower first word is the first difference, and the set that has it is the larger.
                return b.cmp(a).then_with(|| x.cmp(y));
            }
        }
        let len = |s: &Self| s.last().map_or(0, |id| u64::from(id / 64) + 1);
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
    fn a_shared_set_is_one_copy_and_behaves_as_its_own() {
        use std::hash::{BuildHasher, RandomState};
        let own = IdSet::parse_list("0-7,8192-8199").unwrap();
        let shared = own.clone().shared();
        let (mut a, b) = (shared.clone(), shared.clone());
        assert_eq!(a.words_at(), b.words_at());
        assert_eq!(b.clone().shared().words_at(), b.words_at(), "sharing a shared set keeps its one copy");
        assert_ne!(own.words_at(), shared.words_at());
        assert_eq!(a, own);
        assert_eq!(own, a);
        assert!(a.cmp(&own).is_eq());
        let h = RandomState::new();
        assert_eq!(h.hash_one(&a), h.hash_one(&own));
        assert_eq!((a.to_list(), a.len(), a.first(), a.last()), (own.to_list(), 16, Some(0), Some(8199)));
        assert_eq!((a.stored_words(), a.to_mask(1)), (own.stored_words(), own.to_mask(1)));
        assert_eq!(a.union(&own), own);
        // A change to one copy copies the words first: the others keep the set.
        a.insert(100);
        assert!(a.contains(100) && !b.contains(100) && !shared.contains(100));
        assert_ne!(a.words_at(), b.words_at());
        a.remove(100);
        assert_eq!(a, b);
        assert_eq!(serde_json::to_string(&b).unwrap(), serde_json::to_string(&own).unwrap());
    }

    #[test]
    fn a_set_keeps_only_its_words() {
        // The SMT siblings of a 65,536-CPU machine numbered as Linux numbers x86 CPUs: two words,
        // not a bitmap up to CPU 65,535 (1,024 words).
        let s: IdSet = [5, 32773].into_iter().collect();
        assert_eq!(s.stored_words(), 2);
        assert_eq!(IdSet::parse_list("65535").unwrap().stored_words(), 1);
        let all = IdSet::first_n(65536);
        assert_eq!((all.len(), all.stored_words()), (65536, 1024));
        assert_eq!(all.intersection(&s).stored_words(), 2);
        assert_eq!(s.to_words().len(), 513);
        // A node's CPUs as Linux numbers them on that machine: two runs of 8 words, far apart.
        let node = IdSet::parse_list("0-511,32768-33279").unwrap();
        assert_eq!(node.stored_words(), 16);
        assert!(node.contains(33000) && !node.contains(600));
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
        fn runs_order_and_compare_as_plain_bitmaps(a in proptest::collection::vec((0u32..700, 0u32..200), 0..4),
                                                   b in proptest::collection::vec((0u32..700, 0u32..200), 0..4)) {
            // Sets of a few ranges: dense, sparse and mixed forms.
            let set = |r: &[(u32, u32)]| -> IdSet { r.iter().flat_map(|&(lo, n)| lo..lo + n).collect() };
            let (sa, sb) = (set(&a), set(&b));
            prop_assert_eq!(sa.cmp(&sb), dense_cmp(&sa, &sb));
            prop_assert_eq!(sa == sb, sa.to_words() == sb.to_words());
            let rebuilt: IdSet = sa.iter().collect();
            prop_assert_eq!(&rebuilt, &sa);
            prop_assert_eq!(IdSet::parse_list(&sa.to_list()).unwrap(), sa.clone());
            let u = sa.union(&sb);
            prop_assert_eq!(u.iter().collect::<std::collections::BTreeSet<_>>(),
                            sa.iter().chain(sb.iter()).collect::<std::collections::BTreeSet<_>>());
            prop_assert_eq!(sa.intersection(&sb), sa.iter().filter(|i| sb.contains(*i)).collect::<IdSet>());
            prop_assert_eq!(sa.difference(&sb), sa.iter().filter(|i| !sb.contains(*i)).collect::<IdSet>());
        }

        #[test]
        fn insert_remove_contains(ops in proptest::collection::vec((0u32..1000, proptest::bool::ANY), 0..80)) {
            let mut set = IdSet::new();
            let mut model = std::collections::BTreeSet::new();
            for (k, (id, add)) in ops.into_iter().enumerate() {
                // Now and then the set is shared, and a copy taken: changes copy the words first.
                let before = (k % 5 == 0).then(|| {
                    set = std::mem::take(&mut set).shared();
                    (set.clone(), model.clone())
                });
                if add {
                    set.insert(id);
                    model.insert(id);
                } else {
                    set.remove(id);
                    model.remove(&id);
                }
                prop_assert_eq!(set.contains(id), model.contains(&id));
                if let Some((copy, was)) = before {
                    prop_assert_eq!(copy.iter().collect::<Vec<_>>(), was.iter().copied().collect::<Vec<_>>());
                }
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(set.first(), model.first().copied());
            prop_assert_eq!(set.last(), model.last().copied());
            prop_assert_eq!(set.len(), model.len());
            prop_assert!(set.stored_words() <= set.to_words().len(), "never more words than the plain bitmap");
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
                       b in proptest::collection::btree_set(0u32..300, 0..40),
                       share in 0u8..4) {
            // Either operand shared or not: the same results.
            let sa: IdSet = a.iter().copied().collect();
            let sb: IdSet = b.iter().copied().collect();
            let sa = if share & 1 != 0 { sa.shared() } else { sa };
            let sb = if share & 2 != 0 { sb.shared() } else { sb };
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
