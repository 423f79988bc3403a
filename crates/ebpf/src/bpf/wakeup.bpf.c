// SPDX-License-Identifier: GPL-2.0-only
/*
 * numapilot wake-up tracer: counts waker -> wakee wake-ups per thread pair from the sched:sched_waking tracepoint.
 *
 * Self-contained on purpose: no vmlinux.h, no kernel BTF (CO-RE) and no system headers, so it compiles with any
 * clang that has the BPF target and loads on any kernel with BPF tracepoint programs (4.7+; LOOKUP_AND_DELETE on
 * hash maps, used by user space to drain, needs 5.14+). The only kernel layout it relies on is the tracepoint's
 * record, declared below from the kernel's own description of it
 * (/sys/kernel/tracing/events/sched/sched_waking/format, identical on 6.12 and 6.18), which is a stable ABI for
 * perf and trace tools.
 */

typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
/* BTF-defined map attributes, as libbpf reads them: an int-array pointer whose length is the value. */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

/* Map types and flags: include/uapi/linux/bpf.h (enum bpf_map_type, BPF_NOEXIST). */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_NOEXIST 1
/* Helper ids: include/uapi/linux/bpf.h (___BPF_FUNC_MAPPER order). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;

/* The sched_waking record, per its format file. For BPF programs the kernel overwrites its first 8 bytes (the
 * common_* fields) with a pointer to the registers before running them (perf_trace_run_bpf_submit in
 * kernel/events/core.c), and the verifier forbids reading them: common_flags, which would tell an interrupt-context
 * wake-up, is not available here.
 *   field:unsigned short common_type;       offset:0;  size:2
 *   field:unsigned char common_flags;       offset:2;  size:1
 *   field:unsigned char common_preempt_count; offset:3; size:1
 *   field:int common_pid;                   offset:4;  size:4
 *   field:char comm[16];                    offset:8;  size:16
 *   field:pid_t pid;                        offset:24; size:4
 *   field:int prio;                         offset:28; size:4
 *   field:int target_cpu;                   offset:32; size:4
 */
struct sched_waking_record {
	unsigned short common_type;
	unsigned char common_flags;
	unsigned char common_preempt_count;
	int common_pid;
	char comm[16];
	int pid;
	int prio;
	int target_cpu;
};

/* Must match `PairKey` / `PairValue` in src/tracer.rs (little-endian, no padding). */
struct pair_key {
	__u32 waker_tid;
	__u32 wakee_tid;
};

struct pair_value {
	__u64 count;
	__u32 waker_tgid;
	__u32 pad;
};

/* max_entries is replaced at load time by TracerOptions::max_pairs (user space); this is only the default. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pair_key);
	__type(value, struct pair_value);
} pairs SEC(".maps");

/* Slot 0: wake-ups not counted because `pairs` was full (reset by user space at each drain). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

SEC("tracepoint/sched/sched_waking")
int on_sched_waking(struct sched_waking_record *rec)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 waker = (__u32)id;
	__u32 tgid = (__u32)(id >> 32);
	__u32 wakee = (__u32)rec->pid;
	/* tid 0 is the idle task (swapper/N): a wake-up it performs is not communication. */
	if (waker == 0 || wakee == 0 || waker == wakee)
		return 0;

	struct pair_key key = { .waker_tid = waker, .wakee_tid = wakee };
	struct pair_value *v = bpf_map_lookup_elem(&pairs, &key);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		return 0;
	}
	struct pair_value first = { .count = 1, .waker_tgid = tgid, .pad = 0 };
	long err = bpf_map_update_elem(&pairs, &key, &first, BPF_NOEXIST);
	if (err == 0)
		return 0;
	/* Another CPU inserted the same pair in between (-EEXIST): count on its entry. */
	v = bpf_map_lookup_elem(&pairs, &key);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		return 0;
	}
	/* The map is full (-E2BIG): count the loss so user space can report it. */
	__u32 zero = 0;
	__u64 *d = bpf_map_lookup_elem(&dropped, &zero);
	if (d)
		__sync_fetch_and_add(d, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
