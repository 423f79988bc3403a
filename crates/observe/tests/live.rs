//! The Reader against the live system: this test process, its threads, children that exit or linger
//! as zombies, a kernel thread, and a whole-machine sample.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numapilot_observe::{thread_cpu_rates, ReadOptions, Reader, SchedMode, VmaKind};

/// Polls `f` every 5 ms until it holds; fails after 60 s, saying it timed out waiting for `what`
/// (a bound for a loaded machine, never the property under test).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out after 60 s waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

#[test]
fn reads_this_process_and_its_threads() {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::park_timeout(Duration::from_millis(50));
                }
            })
        })
        .collect();
    let me = std::process::id();
    let p = Reader::default().read_process(me).unwrap().expect("this process exists");
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.thread().unpark();
        h.join().unwrap();
    }
    assert_eq!(p.pid, me);
    assert!(!p.kernel_thread);
    assert!(p.threads.len() >= 4, "{} threads", p.threads.len());
    assert!(p.threads.iter().any(|t| t.tid == me));
    assert!(p.rss_kb.unwrap() > 0);
    let maps = p.numa_maps.as_ref().expect("own numa_maps is readable");
    assert!(maps.vmas.iter().any(|v| v.kind == VmaKind::Stack));
    assert!(maps.vmas.iter().any(|v| v.kind == VmaKind::File));
    assert!(p.node_usage.iter().map(|u| u.total_kb()).sum::<u64>() > 0);
    assert_eq!(Reader::default().read_stat(me).unwrap().unwrap().starttime, p.starttime);
    for t in &p.threads {
        assert!(t.cpus_allowed().contains(t.last_cpu()) || t.stat.state != 'R');
        assert!(!t.mems_allowed().is_empty());
    }
}

/// The C library's text is mapped by this test and by a `sleep` it starts (and by most other
/// processes): numa_maps shows it with `mapmax` > 1, and the usage per node counts it as shared,
/// a part of the total, never all of it (the test's own heap and stacks are its alone).
#[test]
fn memory_other_processes_map_too_is_counted_as_shared() {
    let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep runs");
    // Its libc pages are mapped once it has run its first instructions: waited for in its own
    // numa_maps (a fixed 200 ms was a guess a loaded machine can outlast).
    until("the child's C library to be mapped", || {
        Reader::default().read_numa_maps(child.id()).ok().flatten().is_some_and(|m| {
            m.vmas.iter().any(|v| v.file.as_deref().is_some_and(|f| f.contains("libc")) && v.resident.is_some())
        })
    });
    let p = Reader::default().read_process(std::process::id()).unwrap().expect("this process exists");
    let _ = child.kill();
    let _ = child.wait();
    let maps = p.numa_maps.as_ref().expect("own numa_maps is readable");
    assert!(maps.vmas.iter().any(|v| v.resident.as_ref().is_some_and(|r| r.mapmax > 1)), "no mapping with mapmax > 1");
    let shared: u64 = p.node_usage.iter().map(|u| u.shared_kb).sum();
    let total: u64 = p.node_usage.iter().map(|u| u.total_kb()).sum();
    assert!(shared > 0 && shared < total, "shared {shared} kB of {total} kB");
    for u in &p.node_usage {
        assert!(u.shared_kb <= u.total_kb(), "{u:?}");
    }
}

#[test]
fn an_exited_process_is_skipped_not_an_error() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let r = Reader::default();
    assert!(r.read_process(pid).unwrap().is_none());
    assert!(r.read_numa_maps(pid).unwrap().is_none());
    assert!(r.tids(pid).unwrap().is_none());
    assert!(r.read_thread(pid, pid).unwrap().is_none());
}

#[test]
fn a_zombie_is_read_without_memory() {
    let child = Command::new("true").stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    let r = Reader::default();
    // Not waited for: it turns into a zombie once it exits.
    let mut p = None;
    until("the child to be a zombie", || {
        p = r.read_process(pid).unwrap();
        p.as_ref().is_some_and(|p| p.stat.state == 'Z')
    });
    let p = p.expect("the zombie is still listed");
    assert_eq!(p.stat.state, 'Z');
    // A zombie has no mm: an empty numa_maps, nothing resident.
    assert!(p.numa_maps.as_ref().is_none_or(|m| m.vmas.is_empty()));
    assert!(p.node_usage.is_empty());
    drop(child); // reaped by the test harness exiting; Child does not wait on drop
}

/// A process with no memory map (a zombie: forked, exited, not yet reaped; a kernel thread) has
/// maps that read empty: an empty list, not an error. (The zombie's stat, read to look for a
/// thread that runs on, was parsed as its maps: "maps: line 1, field range: no '-'".)
#[test]
fn a_process_without_memory_has_empty_maps() {
    use numapilot_observe::maps::MapsFilter;
    // SAFETY: the child only calls _exit, which is async-signal-safe.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: ends the child at once, without running the parent's exit handlers.
        unsafe { libc::_exit(0) };
    }
    let pid = pid as u32;
    let r = Reader::default();
    let zombie = || r.read_stat(pid).unwrap().is_some_and(|st| st.state == 'Z');
    let t0 = Instant::now();
    while !zombie() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let maps = r.read_maps_counted(pid, MapsFilter::SharedObjects);
    let all = r.read_maps(pid, MapsFilter::All);
    let zombie = zombie();
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
    assert!(zombie, "timed out after 60 s waiting for the child to be a zombie");
    assert_eq!(maps.unwrap(), Some((Vec::new(), 0)), "a zombie's maps");
    assert_eq!(all.unwrap(), Some(Vec::new()), "a zombie's maps, every line kept");
    // kthreadd is pid 2 on every Linux system.
    assert_eq!(r.read_maps_counted(2, MapsFilter::All).unwrap(), Some((Vec::new(), 0)), "a kernel thread's maps");
}

#[test]
fn kernel_threads_are_flagged_and_have_no_numa_maps() {
    // kthreadd is pid 2 on every Linux system (also inside the rig guests).
    let p = Reader::default().read_process(2).unwrap().expect("kthreadd");
    assert!(p.kernel_thread);
    assert_eq!(p.comm, "kthreadd");
    assert!(p.numa_maps.is_none());
    assert!(p.rss_kb.is_none());
}

#[test]
fn a_sample_of_the_machine() {
    let r = Reader::default();
    let s = r.sample().unwrap();
    let me = std::process::id();
    assert!(s.process(me).is_some());
    assert!(!s.nodes.is_empty());
    assert!(s.cpu.as_ref().is_some_and(|c| !c.cpus.is_empty()));
    assert_eq!(s.clock_ticks_per_sec, 100);
    let json = serde_json::to_string(&s).unwrap();
    let back: numapilot_observe::Sample = serde_json::from_str(&json).unwrap();
    assert_eq!(back.processes.len(), s.processes.len());
    assert_eq!(back.process(me).unwrap().threads.len(), s.process(me).unwrap().threads.len());
}

#[test]
fn cpu_rate_sees_a_busy_thread() {
    // The busy thread burns 60 ms of its own CPU time between two samples: its rate times the interval
    // must account for at least that much (schedstat counts the same clock), whatever the load.
    let r = Reader::default();
    let me = std::process::id();
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let busy = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        go_rx.recv().unwrap();
        let start = thread_cpu_ns();
        while thread_cpu_ns() - start < 60_000_000 {
            std::hint::spin_loop();
        }
        go_rx.recv().unwrap();
    });
    let tid = rx.recv().unwrap();
    let mut a = r.sample().unwrap();
    a.processes.retain(|p| p.pid == me);
    go_tx.send(()).unwrap();
    // Wait until the spin is done: the thread then blocks on the second recv.
    loop {
        let t = r.read_thread(me, tid).unwrap().unwrap();
        if t.schedstat.unwrap().run_ns >= 60_000_000 && t.stat.state != 'R' {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut b = r.sample().unwrap();
    b.processes.retain(|p| p.pid == me);
    go_tx.send(()).unwrap();
    busy.join().unwrap();
    let rates = thread_cpu_rates(&a, &b);
    let rate = rates.iter().find(|x| x.tid == tid).expect("rate of the busy thread");
    let cpu_ns = rate.cpus * rate.interval_ns as f64;
    assert!(cpu_ns >= 59_000_000.0, "{rate:?}");
}

#[test]
fn thread_affinity_by_syscall_equals_status() {
    use numapilot_observe::ReadOptions;
    // A thread that pins itself to CPU 0 (its own affinity; the test changes nothing else).
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t with CPU 0 set, for the calling thread (pid 0).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
        }
        tx.send(gettid()).unwrap();
        done_rx.recv().unwrap();
    });
    let tid = rx.recv().unwrap();
    let me = std::process::id();
    let fast = Reader::default().read_process(me).unwrap().unwrap();
    let full = Reader::with_options("/", ReadOptions { thread_status: true, ..ReadOptions::default() })
        .read_process(me)
        .unwrap()
        .unwrap();
    done_tx.send(()).unwrap();
    h.join().unwrap();
    let pinned = fast.threads.iter().find(|t| t.tid == tid).unwrap();
    assert_eq!(pinned.cpus_allowed().to_list(), "0");
    assert_eq!(pinned.voluntary_ctxt_switches, None);
    let leader = fast.threads.iter().find(|t| t.tid == me).unwrap();
    assert!(leader.voluntary_ctxt_switches.is_some());
    for t in &full.threads {
        if let Some(f) = fast.threads.iter().find(|x| x.tid == t.tid) {
            assert_eq!(f.cpus_allowed(), t.cpus_allowed(), "tid {}", t.tid);
            assert_eq!(f.mems_allowed(), t.mems_allowed(), "tid {}", t.tid);
        }
    }
    assert!(full.threads.iter().all(|t| t.voluntary_ctxt_switches.is_some()));
}

/// Any process may name a thread with a newline (prctl(PR_SET_NAME)), and the kernel prints the
/// raw name as the first line of the thread's `sched` file: "x\ncurrent_node=" makes the second
/// line read like the NUMA block's. Reading such a process must work and leave its name alone (it
/// failed the whole read, and so every daemon cycle, while that process lived).
#[test]
fn a_thread_named_like_a_sched_field_reads() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let name = c"x\ncurrent_node=";
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
        let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
        assert_eq!(rc, 0);
        tx.send(gettid()).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let me = std::process::id();
    let sched_file = format!("/proc/{me}/task/{tid}/sched");
    let head = std::fs::read_to_string(&sched_file).ok();
    let r = Reader::with_options("/", ReadOptions { sched: SchedMode::Always, ..ReadOptions::default() });
    let p = r.read_process(me);
    let _ = stop_tx.send(());
    h.join().unwrap();
    let p = p.expect("the read works").expect("this process exists");
    let t = p.threads.iter().find(|t| t.tid == tid).expect("the named thread is read");
    assert_eq!(t.stat.comm, "x\ncurrent_node=");
    if let Some(text) = head {
        assert!(
            text.starts_with("x\ncurrent_node= ("),
            "the kernel prints the raw name: {:?}",
            &text[..40.min(text.len())]
        );
        assert!(t.sched.is_some(), "the sched file was there and parsed");
    }
}

/// A process forked from this test whose main thread has exited (the raw exit call: that thread
/// only) while a worker runs on, holding 64 MiB it wrote: its leader is a zombie with no memory of
/// its own. Killed (and reaped) when dropped.
struct ZombieLeader {
    pid: u32,
}

/// Bytes the [`ZombieLeader`]'s worker holds.
const ZLEADER_BYTES: usize = 64 << 20;

impl ZombieLeader {
    fn start() -> Self {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two descriptors for pipe to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the forked process only spawns a thread, allocates (glibc's malloc is fork-safe)
        // and makes system calls; it never returns into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let w = fds[1];
            std::thread::spawn(move || {
                let v = vec![1u8; ZLEADER_BYTES];
                std::hint::black_box(&v);
                // The leader's state reads Z once its exit is done.
                while !std::fs::read_to_string("/proc/self/stat")
                    .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                // SAFETY: writes one byte from a valid buffer to the pipe.
                unsafe { libc::write(w, b"r".as_ptr().cast(), 1) };
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                    std::hint::black_box(&v);
                }
            });
            // SAFETY: ends this thread only; nothing of it is used after.
            unsafe { libc::syscall(libc::SYS_exit, 0) };
            unreachable!()
        }
        // SAFETY: closes the write end this process holds; reads one byte into a valid buffer.
        let got = unsafe {
            libc::close(fds[1]);
            let mut b = 0u8;
            let n = libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
            libc::close(fds[0]);
            n
        };
        let z = ZombieLeader { pid: pid as u32 };
        assert_eq!(got, 1, "the forked process ended before its leader was a zombie");
        z
    }
}

impl Drop for ZombieLeader {
    fn drop(&mut self) {
        // SAFETY: kill and waitpid of the child this test forked.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
            libc::waitpid(self.pid as i32, std::ptr::null_mut(), 0);
        }
    }
}

/// A process whose leader has exited while a thread runs on is read through that thread: its
/// numa_maps shows its memory and its maps its mappings (through the leader's pid both read
/// empty: the process was seen with no memory).
#[test]
fn a_zombie_leaders_memory_is_read_through_a_thread_that_runs_on() {
    let z = ZombieLeader::start();
    let r = Reader::default();
    let st = r.read_stat(z.pid).unwrap().expect("the process is there");
    assert_eq!((st.state, st.num_threads), ('Z', 2));
    let tid = r.mm_thread(z.pid).expect("a thread runs on");
    assert_ne!(tid, z.pid);
    assert_eq!(r.mm_thread(std::process::id()), None, "a process whose leader runs is read through its pid");
    let maps = r.read_numa_maps(z.pid).unwrap().expect("its numa_maps");
    let kb: u64 = maps.usage_by_node().iter().map(|u| u.total_kb()).sum();
    assert!(kb >= (ZLEADER_BYTES >> 10) as u64, "numa_maps shows {kb} kB");
    let all = r.read_maps(z.pid, numapilot_observe::maps::MapsFilter::All).unwrap().expect("its maps");
    let big = all.iter().map(|m| m.end - m.start).max().unwrap_or(0);
    assert!(big >= ZLEADER_BYTES as u64, "no mapping of 64 MiB in {} lines", all.len());
}
