//! Real system calls against the running kernel. Each test that changes a policy or an affinity
//! does so on its own thread, which the test harness discards.
//!
//! These run on any Linux host; node-specific expectations are computed from sysfs and
//! /proc/self/status of the same host, never hard-coded.

use std::os::raw::c_void;

use numapilot_actuate::*;
use numapilot_topology::{CpuSet, IdSet, NodeSet};

fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

fn status_field(name: &str) -> String {
    let s = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    s.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string()).unwrap()
}

/// Nodes this process may allocate from, with memory (where policies can point).
fn memory_nodes() -> NodeSet {
    let allowed = NodeSet::parse_list(&status_field("Mems_allowed_list:")).unwrap();
    let has_memory = std::fs::read_to_string("/sys/devices/system/node/has_memory")
        .map(|s| NodeSet::parse_list(&s).unwrap())
        .unwrap_or_else(|_| allowed.clone());
    allowed.intersection(&has_memory)
}

fn first_memory_node() -> u32 {
    IdSet::first(&memory_nodes()).expect("a node with memory")
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty());
    let ma: u32 = it.next().unwrap().parse().unwrap();
    let mi: u32 = it.next().unwrap().parse().unwrap();
    (ma, mi) >= (major, minor)
}

#[test]
fn probe_matches_kernel_release() {
    assert!(kernel_supports(Mode::Bind, ModeFlags::NONE));
    assert!(kernel_supports(Mode::Local, ModeFlags::NONE));
    assert_eq!(kernel_supports(Mode::PreferredMany, ModeFlags::NONE), kernel_at_least(5, 15));
    assert_eq!(kernel_supports(Mode::WeightedInterleave, ModeFlags::NONE), kernel_at_least(6, 9));
    assert_eq!(kernel_supports(Mode::Bind, ModeFlags::NUMA_BALANCING), kernel_at_least(5, 12));
    // The probe can say no: the kernel refuses static and relative together.
    assert!(!kernel_supports(Mode::Bind, ModeFlags::STATIC_NODES | ModeFlags::RELATIVE_NODES));
}

#[test]
fn set_then_get_every_mode() {
    on_thread(|| {
        let n = first_memory_node();
        let one: NodeSet = std::iter::once(n).collect();
        let mut policies = vec![
            MemPolicy::Bind(one.clone()),
            MemPolicy::Interleave(one.clone()),
            MemPolicy::Preferred(n),
            MemPolicy::Local,
            MemPolicy::Default,
        ];
        if kernel_supports(Mode::PreferredMany, ModeFlags::NONE) {
            policies.push(MemPolicy::PreferredMany(one.clone()));
        }
        if kernel_supports(Mode::WeightedInterleave, ModeFlags::NONE) {
            policies.push(MemPolicy::WeightedInterleave(one.clone()));
        }
        for p in policies {
            set_mempolicy(&p, ModeFlags::NONE).unwrap_or_else(|e| panic!("{p}: {e}"));
            let got = get_mempolicy().unwrap();
            assert_eq!(got.policy(), Some(p.clone()), "raw {:?}", got);
            assert!(got.flags.is_empty());
            // The kernel's own rendering in numa_maps (mpol_to_str) shows the thread's policy on
            // VMAs that have none of their own.
            let expect = match &p {
                MemPolicy::Default => "default".to_string(),
                MemPolicy::Local => "local".to_string(),
                MemPolicy::Preferred(x) => format!("prefer:{x}"),
                MemPolicy::PreferredMany(s) => format!("prefer (many):{s}"),
                MemPolicy::Bind(s) => format!("bind:{s}"),
                MemPolicy::Interleave(s) => format!("interleave:{s}"),
                MemPolicy::WeightedInterleave(s) => format!("weighted interleave:{s}"),
            };
            let maps = std::fs::read_to_string("/proc/thread-self/numa_maps").unwrap();
            let heap = maps
                .lines()
                .find(|l| l.contains(" heap") || l.contains(" stack"))
                .unwrap_or(maps.lines().next().unwrap());
            assert!(heap.contains(&format!(" {expect} ")), "{p}: {heap}");
        }
        // With a flag: get_mempolicy returns mode | flag, and restore puts it back.
        set_mempolicy(&MemPolicy::Bind(one.clone()), ModeFlags::STATIC_NODES).unwrap();
        let got = get_mempolicy().unwrap();
        assert_eq!(got.raw_mode, 2 | (1 << 15));
        assert_eq!(got.flags, ModeFlags::STATIC_NODES);
        set_mempolicy(&MemPolicy::Default, ModeFlags::NONE).unwrap();
        restore_mempolicy(&got).unwrap();
        assert_eq!(get_mempolicy().unwrap(), got);
    });
}

#[test]
fn interleave_next_node_needs_interleave() {
    on_thread(|| {
        let n = first_memory_node();
        set_mempolicy(&MemPolicy::Interleave(std::iter::once(n).collect()), ModeFlags::NONE).unwrap();
        assert_eq!(interleave_next_node().unwrap(), n);
        set_mempolicy(&MemPolicy::Default, ModeFlags::NONE).unwrap();
        let e = interleave_next_node().unwrap_err();
        assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    });
}

#[test]
fn node_that_does_not_exist_is_einval_not_unsupported() {
    // Find a node id with no sysfs directory (7 on most test machines; otherwise the next free one).
    let absent =
        (1..1024).find(|i| !std::path::Path::new(&format!("/sys/devices/system/node/node{i}")).exists()).unwrap();
    on_thread(move || {
        let before = get_mempolicy().unwrap();
        let e = set_mempolicy(&MemPolicy::Bind(std::iter::once(absent).collect()), ModeFlags::NONE).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::Syscall { syscall: "set_mempolicy", errno: libc::EINVAL, .. }), "{m}");
        assert!(m.contains(&format!("nodes={absent}")) && m.contains("EINVAL"), "{m}");
        assert_eq!(get_mempolicy().unwrap(), before, "a refused call changes nothing");
    });
}

#[test]
fn mems_allowed_agrees_with_proc() {
    let from_kernel = mems_allowed().unwrap();
    assert_eq!(from_kernel, NodeSet::parse_list(&status_field("Mems_allowed_list:")).unwrap());
}

struct Mapping {
    addr: *mut c_void,
    len: usize,
}

impl Mapping {
    fn anon(pages: usize) -> Mapping {
        let len = pages * page_size();
        // SAFETY: a fresh private anonymous mapping; unmapped in Drop.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        Mapping { addr, len }
    }
    fn page(&self, i: usize) -> *mut u8 {
        (self.addr as usize + i * page_size()) as *mut u8
    }
    fn touch(&self, i: usize) {
        // SAFETY: page `i` lies inside the mapping, which is readable and writable.
        unsafe { std::ptr::write_volatile(self.page(i), 1) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `anon` mapped.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

#[test]
fn mbind_places_pages_and_move_pages_reports_them() {
    let n = first_memory_node();
    let one: NodeSet = std::iter::once(n).collect();
    let m = Mapping::anon(4);
    mbind(
        m.addr,
        m.len,
        &MemPolicy::Bind(one.clone()),
        ModeFlags::NONE,
        MbindFlags { move_pages: true, ..Default::default() },
    )
    .unwrap();
    let vma = get_mempolicy_at(m.addr).unwrap();
    assert_eq!(vma.policy(), Some(MemPolicy::Bind(one.clone())));
    for i in 0..3 {
        m.touch(i);
    }
    assert_eq!(node_of_address(m.page(0) as *const c_void).unwrap(), n);

    // Query where pages are: three touched, one never touched (ENOENT), one address not mapped at
    // all (EFAULT). The unmapped address is page 0: it lies below vm.mmap_min_addr (4096 or more on
    // any distribution kernel; 65536 on Debian), so nothing can be mapped there. A page we mapped and
    // unmapped ourselves is not safe: another test thread's mmap may reuse it in between (seen once).
    let hole_addr = 0usize;
    let addrs = [m.page(0) as usize, m.page(1) as usize, m.page(2) as usize, m.page(3) as usize, hole_addr];
    let q = move_pages(0, &addrs, None, MoveFlags::Own).unwrap();
    assert_eq!(q.on_node(n), 3, "{q:?}");
    assert_eq!(q.status[3], PageStatus::Failed(libc::ENOENT), "{q:?}");
    assert_eq!(q.status[4], PageStatus::Failed(libc::EFAULT), "{q:?}");
    assert_eq!(q.failed(), 2);
    assert_eq!(q.failures_by_errno().get(&libc::EFAULT), Some(&1));

    // Moving to the node they are on succeeds page by page.
    let mv = move_pages(0, &addrs[..3], Some(&[n, n, n]), MoveFlags::Own).unwrap();
    assert_eq!(mv.status, vec![PageStatus::Node(n); 3]);
    assert_eq!(mv.not_migrated, 0);

    // migrate_pages from a node to itself has nothing to move.
    assert_eq!(migrate_pages(0, &one, &one).unwrap(), 0);
    assert_eq!(migrate_pages_flags(0, &one, &one, MoveFlags::Own).unwrap(), 0);
}

/// `MoveFlags::Own` for migrate_pages: the call is made from a thread without CAP_SYS_NICE, so the
/// kernel takes MPOL_MF_MOVE (own pages only) even when we run as root. Expected, as root: on that
/// thread the capability is gone from the effective set and move_pages with MPOL_MF_MOVE_ALL is
/// refused (EPERM, the kernel's own `capable(CAP_SYS_NICE)` check); on ours it is still there and
/// the same call is allowed. Fails if the drop does not happen or leaks to the caller.
#[test]
fn own_pages_calls_run_without_cap_sys_nice_on_their_own_thread() {
    if !has_effective_cap(CAP_SYS_NICE).unwrap() {
        eprintln!("SKIPPED: needs CAP_SYS_NICE (run as root) to show it being dropped");
        return;
    }
    let m = Mapping::anon(1);
    m.touch(0);
    let addr = [m.page(0) as usize];
    let n = match move_pages(0, &addr, None, MoveFlags::Own).unwrap().status[0] {
        PageStatus::Node(n) => n,
        s => panic!("page 0 not present: {s:?}"),
    };
    let (inside, refused) = without_cap_sys_nice("move_pages", || {
        let inside = has_effective_cap(CAP_SYS_NICE)?;
        Ok((inside, move_pages(0, &addr, Some(&[n]), MoveFlags::All).map_err(|e| e.errno())))
    })
    .unwrap();
    assert!(!inside, "CAP_SYS_NICE still effective on the call's thread");
    assert_eq!(refused.unwrap_err(), Some(libc::EPERM), "MOVE_ALL without CAP_SYS_NICE");
    assert!(has_effective_cap(CAP_SYS_NICE).unwrap(), "the caller keeps CAP_SYS_NICE");
    let ok = move_pages(0, &addr, Some(&[n]), MoveFlags::All).unwrap();
    assert_eq!(ok.status, vec![PageStatus::Node(n)]);
}

#[test]
fn affinity_round_trip_and_refusal() {
    on_thread(|| {
        let before = sched_getaffinity(0).unwrap();
        assert_eq!(before, CpuSet::parse_list(&status_field("Cpus_allowed_list:")).unwrap());
        let first: CpuSet = std::iter::once(IdSet::first(&before).unwrap()).collect();
        sched_setaffinity(0, &first).unwrap();
        assert_eq!(sched_getaffinity(0).unwrap(), first);
        assert_eq!(status_field("Cpus_allowed_list:"), first.to_list());
        // CPU 4095 does not exist here (or is beyond nr_cpu_ids): the kernel refuses, and the mask
        // buffer for it is 512 bytes wide.
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
        if !CpuSet::parse_list(&online).unwrap().contains(4095) {
            let e = sched_setaffinity(0, &std::iter::once(4095).collect()).unwrap_err();
            let m = e.to_string();
            assert!(m.starts_with("sched_setaffinity(pid=0, len=512, cpus=4095) failed: EINVAL"), "{m}");
        }
        sched_setaffinity(0, &before).unwrap();
        assert_eq!(sched_getaffinity(0).unwrap(), before);
    });
}

#[test]
fn placement_rehearsal_leaves_caller_alone_and_apply_restores() {
    on_thread(|| {
        let n = first_memory_node();
        let cpus = sched_getaffinity(0).unwrap();
        let last: CpuSet = std::iter::once(IdSet::last(&cpus).unwrap()).collect();
        let plan = ThreadPlacement {
            policy: Some((MemPolicy::Bind(std::iter::once(n).collect()), ModeFlags::NONE)),
            cpus: Some(last.clone()),
        };
        plan.rehearse().unwrap();
        assert_eq!(get_mempolicy().unwrap().mode, Some(Mode::Default), "rehearsal must not touch the caller");
        assert_eq!(sched_getaffinity(0).unwrap(), cpus);

        // A plan whose CPUs the kernel refuses: the rehearsal reports it, the caller is unchanged.
        let bad = ThreadPlacement { cpus: Some(std::iter::once(60_000).collect()), ..plan.clone() };
        assert!(matches!(bad.rehearse(), Err(Error::Syscall { syscall: "sched_setaffinity", .. })));
        // apply() of the same plan sets the policy, fails on the CPUs, and restores the policy.
        assert!(bad.apply().is_err());
        assert_eq!(get_mempolicy().unwrap().mode, Some(Mode::Default), "half-applied policy was restored");

        let orig = plan.apply().unwrap();
        assert_eq!(get_mempolicy().unwrap().policy(), plan.policy.as_ref().map(|p| p.0.clone()));
        assert_eq!(sched_getaffinity(0).unwrap(), last);
        orig.restore().unwrap();
        assert_eq!(get_mempolicy().unwrap().mode, Some(Mode::Default));
        assert_eq!(sched_getaffinity(0).unwrap(), cpus);
    });
}
