//! Kernel bitmaps for node and CPU masks, and the `maxnode` quirk.
//!
//! # Problem
//!
//! Every NUMA system call takes a set of nodes or CPUs as a pointer to an array of C `unsigned
//! long` words plus a size, and the size means something different for each call:
//!
//! ```text
//!   call                         size argument        what the kernel does with it
//!   ---------------------------  -------------------  ------------------------------------------
//!   set_mempolicy, mbind,        maxnode = bits + 1   get_nodes(): `--maxnode`, then reads that
//!   migrate_pages                                     many bits; bits >= MAX_NUMNODES must be 0;
//!                                                     maxnode - 1 > PAGE_SIZE * 8 is EINVAL
//!   get_mempolicy                maxnode >= nr_node_ids, else EINVAL; copies
//!                                                     ALIGN(maxnode - 1, 64) / 8 bytes back
//!   sched_setaffinity            len in bytes         reads min(len, cpumask_size()) bytes; CPUs
//!                                                     beyond the kernel's mask are dropped
//!   sched_getaffinity            len in bytes         EINVAL unless len * 8 >= nr_cpu_ids and
//!                                                     len is a multiple of sizeof(long)
//! ```
//!
//! # The maxnode quirk
//!
//! `mm/mempolicy.c:get_nodes()` starts with `--maxnode;` and then copies `maxnode` bits. So a
//! caller that passes the honest bit count of its buffer loses the highest bit: with a one-word
//! (64-bit) mask and `maxnode = 64` the kernel reads nodes 0..=62 and node 63 silently vanishes
//! from the policy. The off-by-one is part of the ABI (a 2017 patch to "fix" it was refused because
//! libnuma, the reference user, has always passed `bitmask->size + 1`). We do the same: a mask of
//! `n` words is passed with `maxnode = n * BITS_PER_LONG + 1`, which the kernel turns back into
//! exactly `n * BITS_PER_LONG` bits.
//!
//! ```text
//!   words:   [ w0: nodes 0..63 ][ w1: nodes 64..127 ]      n = 2 words = 128 bits
//!   maxnode: 129 ---- kernel: --maxnode -> 128 bits read, none lost
//! ```
//!
//! For `get_mempolicy` the kernel does *not* decrement; it needs `maxnode >= nr_node_ids` and copies
//! `ALIGN(maxnode - 1, 64) / 8` bytes, so passing `bits + 1` for a buffer of `bits` (a multiple of
//! 64) copies exactly the buffer. One convention therefore serves all four node calls.
//!
//! # Limits
//!
//! The largest node mask the kernel accepts is one page of bits (`PAGE_SIZE * 8`, 32768 on 4 KiB
//! pages); we refuse node ids at or above [`MAX_MASK_BITS`] before calling. Bits at or above the
//! kernel's `MAX_NUMNODES` (at most 1024 on x86-64) are rejected by the kernel with EINVAL.
//! CPU masks have no such ceiling: the buffer is as wide as the highest CPU, so masks with CPU
//! 4095 or beyond glibc's 1024-CPU `cpu_set_t` work unchanged.

use std::os::raw::c_ulong;

use numapilot_topology::IdSet;

/// Bits in one kernel bitmap word (`BITS_PER_LONG`).
pub const BITS_PER_WORD: u32 = c_ulong::BITS;

/// The largest node-mask width (in bits) `get_nodes()` accepts: one 4 KiB page of bits. Larger
/// `maxnode` values are EINVAL (`maxnode > PAGE_SIZE * BITS_PER_BYTE` after the decrement).
pub const MAX_MASK_BITS: u32 = 4096 * 8;

/// A set laid out as the kernel's `unsigned long` bitmap: bit `i % BITS_PER_WORD` of word
/// `i / BITS_PER_WORD` is id `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelBitmap {
    words: Vec<c_ulong>,
}

impl KernelBitmap {
    /// Lays out `set` with at least `min_bits` bits (rounded up to whole words, at least one word).
    pub fn from_set(set: &IdSet, min_bits: u32) -> Self {
        let needed = set.last().map_or(0, |m| m + 1).max(min_bits).max(1);
        let nwords = needed.div_ceil(BITS_PER_WORD) as usize;
        let mut words = vec![0 as c_ulong; nwords];
        for id in set.iter() {
            words[(id / BITS_PER_WORD) as usize] |= (1 as c_ulong) << (id % BITS_PER_WORD);
        }
        Self { words }
    }

    /// An all-zero bitmap of at least `bits` bits (whole words, at least one).
    pub fn zeroed(bits: u32) -> Self {
        Self { words: vec![0; bits.max(1).div_ceil(BITS_PER_WORD) as usize] }
    }

    /// Reads the set back.
    pub fn to_set(&self) -> IdSet {
        let mut set = IdSet::new();
        for (wi, &w) in self.words.iter().enumerate() {
            let mut bits = w;
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                set.insert(wi as u32 * BITS_PER_WORD + b);
            }
        }
        set
    }

    /// Width in bits (a multiple of [`BITS_PER_WORD`]).
    pub fn bits(&self) -> u32 {
        self.words.len() as u32 * BITS_PER_WORD
    }

    /// Width in bytes, the `len` argument of `sched_{set,get}affinity`.
    pub fn byte_len(&self) -> usize {
        std::mem::size_of_val(self.words.as_slice())
    }

    /// The `maxnode` argument for `set_mempolicy`, `mbind`, `migrate_pages` and `get_mempolicy`:
    /// the width in bits plus one (see the module docs for why).
    pub fn maxnode(&self) -> c_ulong {
        c_ulong::from(self.bits()) + 1
    }

    /// Pointer to the first word, for the kernel to read.
    pub fn as_ptr(&self) -> *const c_ulong {
        self.words.as_ptr()
    }

    /// Pointer to the first word, for the kernel to write.
    pub fn as_mut_ptr(&mut self) -> *mut c_ulong {
        self.words.as_mut_ptr()
    }

    /// The raw words.
    pub fn words(&self) -> &[c_ulong] {
        &self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxnode_is_bits_plus_one() {
        let m = KernelBitmap::from_set(&IdSet::parse_list("0").unwrap(), 0);
        assert_eq!(m.bits(), BITS_PER_WORD);
        assert_eq!(m.maxnode(), c_ulong::from(BITS_PER_WORD) + 1);
        // A node in the second word makes the buffer two words wide, and maxnode follows.
        let m = KernelBitmap::from_set(&IdSet::parse_list("0,64").unwrap(), 0);
        assert_eq!(m.bits(), 128);
        assert_eq!(m.maxnode(), 129);
        // With the honest bit count (128) the kernel's `--maxnode` would read 127 bits and drop
        // node 127; with ours it reads exactly 128.
        let m = KernelBitmap::from_set(&IdSet::parse_list("127").unwrap(), 0);
        assert_eq!(m.maxnode() - 1, 128);
        assert!(m.to_set().contains(127));
    }

    #[test]
    fn sparse_nodes_land_on_their_bits() {
        // Nodes 0 and 8 (a legal sparse machine), and a far node 300.
        let m = KernelBitmap::from_set(&IdSet::parse_list("0,8,300").unwrap(), 0);
        assert_eq!(m.words()[0], 0b1_0000_0001);
        let w = (300 / BITS_PER_WORD) as usize;
        assert_eq!(m.words()[w], (1 as c_ulong) << (300 % BITS_PER_WORD));
        assert_eq!(m.to_set().to_list(), "0,8,300");
    }

    #[test]
    fn cpu_masks_above_1024() {
        let set = IdSet::parse_list("0,1023,1024,1500,4095").unwrap();
        let m = KernelBitmap::from_set(&set, 0);
        assert_eq!(m.bits(), 4096);
        assert_eq!(m.byte_len(), 512);
        assert_eq!(m.to_set(), set);
        let w1500 = (1500 / BITS_PER_WORD) as usize;
        assert_ne!(m.words()[w1500] & ((1 as c_ulong) << (1500 % BITS_PER_WORD)), 0);
        assert_eq!(m.words()[(4095 / BITS_PER_WORD) as usize] >> (BITS_PER_WORD - 1), 1);
        // Only the expected bits are set: popcount equals the set size.
        assert_eq!(m.words().iter().map(|w| w.count_ones() as usize).sum::<usize>(), set.len());
    }

    #[test]
    fn min_bits_widens_and_empty_has_one_word() {
        let m = KernelBitmap::from_set(&IdSet::new(), 0);
        assert_eq!(m.bits(), BITS_PER_WORD);
        assert!(m.to_set().is_empty());
        let m = KernelBitmap::from_set(&IdSet::parse_list("1").unwrap(), 1025);
        assert_eq!(m.bits(), 1025u32.div_ceil(BITS_PER_WORD) * BITS_PER_WORD);
        assert_eq!(KernelBitmap::zeroed(1024).bits(), 1024);
    }
}
