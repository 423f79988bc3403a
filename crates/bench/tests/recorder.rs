//! The recorder against the live kernel: a buffer bound to node 0 in this test process and a
//! thread named like a worker's, checked against the kernel's own answer for every page
//! (`get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)`, through the actuate crate).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use numapilot_actuate::{mbind, node_of_address, MbindFlags, MemPolicy, ModeFlags};
use numapilot_bench::recorder::Watched;
use numapilot_bench::worker::{page_bytes, THREAD_PREFIX};
use numapilot_bench::Recorder;
use numapilot_topology::{NodeSet, Topology};

const LEN: usize = 4 << 20;

#[test]
fn memory_bound_to_node_0_and_a_worker_thread_are_seen_there() {
    let page = page_bytes() as usize;
    // The buffer between two PROT_NONE pages, as the worker maps it, so it is a VMA of its own.
    // SAFETY: a fresh anonymous mapping; only its middle is made writable and used below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN + 2 * page,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let start = unsafe { (base as *mut u8).add(page) };
    assert_eq!(unsafe { libc::mprotect(start as *mut libc::c_void, LEN, libc::PROT_READ | libc::PROT_WRITE) }, 0);
    let node0: NodeSet = std::iter::once(0).collect();
    mbind(start as *const libc::c_void, LEN, &MemPolicy::Bind(node0), ModeFlags::NONE, MbindFlags::default()).unwrap();
    for off in (0..LEN).step_by(page) {
        // SAFETY: inside the read-write range.
        unsafe { start.add(off).write_volatile(0x5a) };
    }
    // The kernel's answer, page by page: every page on node 0.
    for off in (0..LEN).step_by(page) {
        let node = node_of_address(unsafe { start.add(off) } as *const libc::c_void).unwrap();
        assert_eq!(node, 0, "page at +{off}");
    }
    let stop = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    /// Stops the spinning thread however the scope ends, so a failed assertion fails the test
    /// instead of waiting forever for the thread.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        std::thread::Builder::new()
            .name(format!("{THREAD_PREFIX}0"))
            .spawn_scoped(s, || {
                started.store(true, Ordering::Release);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        // The new thread names itself when it starts running (std sets the name from inside it): until then
        // its comm is this process's, and on a busy machine the sample below came first (a fresh-clone test run failed on it).
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let topo = Topology::from_sysfs(Path::new("/")).unwrap();
        let rec = Recorder::new("/", &topo);
        let me = std::process::id();
        let starttime = rec.starttime(me).unwrap().unwrap();
        let w =
            Watched { pid: me, starttime, buffer: Some((start as u64, LEN as u64)), threads: vec![(0, LEN as u64)] };
        let sample = rec.sample(&w).unwrap().expect("this process is alive");
        let i0 = rec.nodes().iter().position(|&n| n == 0).unwrap();
        // A page the kernel is migrating at that instant (compaction) is not present: up to 512 KiB
        // (128 pages) may be missing, as the CLI's bench test allows; a wrong VMA is off by far more.
        let full = (LEN / 1024) as u64;
        assert!((full - 512..=full).contains(&sample.buffer_kb[i0]), "{sample:?}");
        assert_eq!(sample.buffer_kb.iter().sum::<u64>(), sample.buffer_kb[i0], "all of it on node 0");
        assert!(sample.mem_kb[i0] >= sample.buffer_kb[i0]);
        // Exactly one thread of this process is named like a worker thread; it runs on a CPU of
        // some node.
        assert_eq!(sample.thread_nodes.iter().sum::<u32>(), 1, "{sample:?}");
        // Its range (the whole buffer) is on node 0 by move_pages' answer; on this one-node host
        // the thread is on node 0 too. Without ranges there is no per-thread figure.
        let thread_node = rec.nodes()[sample.thread_nodes.iter().position(|&c| c == 1).unwrap()];
        assert_eq!(sample.thread_local_pct, Some(if thread_node == 0 { 100.0 } else { 0.0 }), "{sample:?}");
        assert_eq!(rec.sample(&Watched { threads: vec![], ..w.clone() }).unwrap().unwrap().thread_local_pct, None);
        // Without the buffer's address nothing is counted as buffer; a wrong start time is
        // another process (a reused pid): not sampled.
        let no_buf = rec.sample(&Watched { buffer: None, ..w.clone() }).unwrap().unwrap();
        assert_eq!(no_buf.buffer_kb.iter().sum::<u64>(), 0);
        // A buffer address with no VMA there (unmapped: the worker is finishing) is not sampled.
        let elsewhere = Watched { buffer: Some((8, 8)), ..w.clone() };
        assert!(rec.sample(&elsewhere).unwrap().is_none());
        assert!(rec.sample(&Watched { starttime: starttime + 1, ..w.clone() }).unwrap().is_none());
        stop.store(true, Ordering::Relaxed);
    });
    // SAFETY: unmaps the mapping made above; nothing refers to it any more.
    unsafe { libc::munmap(base, LEN + 2 * page) };
}

#[test]
fn a_process_that_is_gone_is_skipped() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let topo = Topology::from_sysfs(Path::new("/")).unwrap();
    let rec = Recorder::new("/", &topo);
    assert!(rec.sample(&Watched { pid, starttime: 0, buffer: None, threads: vec![] }).unwrap().is_none());
    let m = rec.migrated().unwrap();
    assert!(m.pgmigrate_success.is_some());
}
