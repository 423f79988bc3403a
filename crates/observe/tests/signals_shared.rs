//! Shared memory between real processes: a memfd, a SysV shm segment and an anonymous MAP_SHARED
//! region mapped by this process and a forked child, found through /proc/PID/maps; and SysV
//! segments of one shmid in two IPC namespaces, which are two objects.

use numapilot_observe::maps::MapsFilter;
use numapilot_observe::Reader;

#[path = "support/forked.rs"]
mod forked;
use forked::Child;

fn map_shared(fd: libc::c_int, len: usize) -> *mut libc::c_void {
    // SAFETY: a fresh shared mapping of a valid fd (or -1 with MAP_ANONYMOUS).
    let flags = if fd < 0 { libc::MAP_SHARED | libc::MAP_ANONYMOUS } else { libc::MAP_SHARED };
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
    assert_ne!(p, libc::MAP_FAILED);
    p
}

#[test]
fn memfd_shm_and_anonymous_shared_memory_across_fork() {
    let me = std::process::id();
    // memfd of 3 pages.
    // SAFETY: a NUL-terminated name.
    let mfd = unsafe { libc::memfd_create(c"numapilot-test-ring".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(mfd >= 0);
    // SAFETY: our fd.
    assert_eq!(unsafe { libc::ftruncate(mfd, 3 * 4096) }, 0);
    let m = map_shared(mfd, 3 * 4096);
    // SysV shm segment of 2 pages, removed right away (stays while attached).
    // SAFETY: plain shmget/shmat/shmctl on a private key.
    let shmid = unsafe { libc::shmget(libc::IPC_PRIVATE, 2 * 4096, libc::IPC_CREAT | 0o600) };
    assert!(shmid >= 0);
    let shm = unsafe { libc::shmat(shmid, std::ptr::null(), 0) };
    assert_ne!(shm as isize, -1);
    unsafe { libc::shmctl(shmid, libc::IPC_RMID, std::ptr::null_mut()) };
    // Anonymous shared memory: one shmem inode, inherited by the child.
    let anon = map_shared(-1, 4096);

    let (child, ()) = Child::fork_running(|| ());
    let cpid = child.pid;
    let reader = Reader::new("/");

    // The child's own maps show the three objects, shared.
    let cm = reader.read_maps(cpid, MapsFilter::SharedObjects).unwrap().expect("child is alive");
    let find = |addr: *mut libc::c_void| cm.iter().find(|e| e.start == addr as u64).cloned();
    let e_memfd = find(m).expect("memfd mapping in child");
    assert!(e_memfd.path.starts_with("/memfd:numapilot-test-ring"), "{}", e_memfd.path);
    assert_eq!(e_memfd.len(), 3 * 4096);
    let e_shm = find(shm).expect("shm mapping in child");
    assert!(e_shm.path.starts_with("/SYSV"), "{}", e_shm.path);
    let e_anon = find(anon).expect("anonymous shared mapping in child");
    assert!(e_anon.inode != 0 && e_anon.shared);

    // The SysV segment is named with the IPC namespace both are in; nothing else has one.
    let ns = reader.ipc_namespace(me).expect("this process's IPC namespace");
    assert_eq!((e_shm.ipc_ns, e_memfd.ipc_ns, e_anon.ipc_ns), (Some(ns), None, None));

    let shared = reader.read_shared(&[me, cpid]).unwrap();
    for (e, bytes) in [(&e_memfd, 3 * 4096u64), (&e_shm, 2 * 4096), (&e_anon, 4096)] {
        let obj = shared
            .iter()
            .find(|s| s.dev == e.dev && s.inode == e.inode)
            .unwrap_or_else(|| panic!("{} not found shared: {shared:?}", e.path));
        assert_eq!(obj.users, vec![(me.min(cpid), bytes), (me.max(cpid), bytes)], "{}", e.path);
        assert_eq!(obj.path, e.path);
        assert_eq!(obj.ipc_ns, e.ipc_ns);
        // Both map it at the same address (the child's mapping is the inherited one).
        assert_eq!(obj.ranges_of(me).collect::<Vec<_>>(), vec![(e.start, e.end)], "{}", e.path);
        assert_eq!(obj.ranges_of(cpid).collect::<Vec<_>>(), vec![(e.start, e.end)], "{}", e.path);
    }
    // Each object is shared by exactly these two processes, and nothing is reported for a single one.
    let alone = reader.read_shared(&[cpid]).unwrap();
    assert!(alone.is_empty(), "one process shares with nobody: {alone:?}");

    // After the child is gone, its pid is skipped, not an error.
    drop(child);
    let after = reader.read_shared(&[me, cpid]).unwrap();
    assert!(after.iter().all(|s| s.users.iter().all(|u| u.0 != cpid)));
    assert_eq!(reader.read_maps(cpid, MapsFilter::All).unwrap(), None);
    // SAFETY: unmapping what we mapped.
    unsafe {
        libc::munmap(m, 3 * 4096);
        libc::shmdt(shm);
        libc::munmap(anon, 4096);
        libc::close(mfd);
    }
}

/// A SysV segment's inode is its shmid, and each IPC namespace counts shmids from 0: two
/// containers' first segments are both `00:01 0 /SYSV00000000 (deleted)` in their maps. Two
/// children, each in an IPC namespace of its own (`unshare(CLONE_NEWIPC)`, as a container runtime
/// starts one; needs CAP_SYS_ADMIN, as the tests run), each attach a segment of their own: the same
/// shmid, device and path, two namespaces, and not one object shared by the two (it was, keyed by
/// device and inode alone). (The children also inherit whatever this test process maps shared
/// when they fork, such as the other test's objects: only their own segments are looked at.)
#[test]
fn sysv_segments_of_one_shmid_in_two_ipc_namespaces_are_not_shared() {
    // The address the segment is attached at, or an error below 8.
    let segment = || {
        // SAFETY: plain unshare/shmget/shmat/shmctl on a private key; the memory touched is ours.
        unsafe {
            if libc::unshare(libc::CLONE_NEWIPC) != 0 {
                return 1;
            }
            let id = libc::shmget(libc::IPC_PRIVATE, 2 * 4096, libc::IPC_CREAT | 0o600);
            if id < 0 {
                return 2;
            }
            let at = libc::shmat(id, std::ptr::null(), 0);
            if at as isize == -1 {
                return 3;
            }
            *(at as *mut u8) = 1;
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            at as u64
        }
    };
    let (a, at_a) = Child::fork_running(segment);
    let (b, at_b) = Child::fork_running(segment);
    assert!(at_a >= 8 && at_b >= 8, "unshare (1), shmget (2) or shmat (3) failed in a child: {at_a}, {at_b}");
    let (pa, pb) = (a.pid, b.pid);
    let reader = Reader::new("/");
    let own = |pid: u32, at: u64| {
        let m = reader.read_maps(pid, MapsFilter::SharedObjects).unwrap().expect("child is alive");
        m.into_iter().find(|e| e.start == at).expect("the child's segment")
    };
    let (ea, eb) = (own(pa, at_a), own(pb, at_b));
    // What maps alone shows of the two is the same: fresh namespaces hand out the same first shmid.
    assert!(numapilot_observe::maps::sysv_segment(&ea.path), "{}", ea.path);
    assert_eq!((ea.dev, ea.inode, &ea.path), (eb.dev, eb.inode, &eb.path));
    let (na, nb) = (reader.ipc_namespace(pa).unwrap(), reader.ipc_namespace(pb).unwrap());
    assert_ne!(na, nb);
    assert_eq!((ea.ipc_ns, eb.ipc_ns), (Some(na), Some(nb)));
    let shared = reader.read_shared(&[pa, pb]).unwrap();
    let tied: Vec<_> = shared.iter().filter(|o| o.ranges_of(pa).any(|r| r.0 == at_a)).collect();
    assert!(tied.is_empty(), "two segments, nothing shared: {tied:?}");
}
