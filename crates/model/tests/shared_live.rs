//! Shared memory counted once, on real processes: memfds made with `memfd_create`, read back
//! through the live /proc (numa_maps, maps) into a sample and a model.
//!
//! Every memfd is `/memfd:NAME (deleted)` in maps and numa_maps whatever memfd it is, and
//! numa_maps shows no inode: a memfd shared across fork and another memfd of the same name are
//! one path. The model tells them apart by where maps showed each mapped (`SharedMemory::ranges`).

use numapilot_model::{Model, Tunables};
use numapilot_observe::Reader;
use numapilot_topology::Topology;

#[path = "../../observe/tests/support/forked.rs"]
mod forked;
use forked::Child;

const NAME: &std::ffi::CStr = c"numapilot-twin";
const PATH: &str = "/memfd:numapilot-twin (deleted)";

/// A memfd named [`NAME`] of `pages` pages of `page` bytes, mapped shared and every page written
/// (resident): its mapping's address, or 0 when a call failed. Async-signal-safe calls only (run in
/// forked children).
fn twin(pages: usize, page: usize) -> usize {
    let len = pages * page;
    // SAFETY: a NUL-terminated name; a fresh shared mapping of our own fd, written within its length.
    unsafe {
        let fd = libc::memfd_create(NAME.as_ptr(), 0);
        if fd < 0 || libc::ftruncate(fd, len as libc::off_t) != 0 {
            return 0;
        }
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return 0;
        }
        for i in 0..pages {
            *(p as *mut u8).add(i * page) = 1;
        }
        p as usize
    }
}

/// This process makes a 64-page memfd and forks `fork` (which so maps the same memfd, and reads
/// it), then makes a
/// second memfd of the same name, 16 pages, of its own; `apart`, forked before any of it, makes a
/// 16-page memfd of the same name too. Only the first memfd is shared (by this process and `fork`),
/// and only its 64 pages are counted once in a group of the two: this process's second memfd is
/// its own (before, numa_maps' VMAs of the path were all taken as the shared object's: 80 pages,
/// and a group of the two took 64 + 80 - 80 off instead of 64).
#[test]
fn memory_of_a_memfd_shared_across_fork_is_told_from_another_of_its_name() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let (apart, apart_at) = Child::fork_running(|| twin(16, page as usize));
    let shared_at = twin(64, page as usize);
    assert!(apart_at != 0 && shared_at != 0, "memfd_create, ftruncate or mmap failed");
    // The fork reads every page of the shared memfd: fork copies no page table entries of a
    // shared mapping (mm/memory.c, `vma_needs_copy`), so its numa_maps shows the pages it touched.
    let (fork, read) = Child::fork_running(|| {
        let mut sum = 0usize;
        for i in 0..64 {
            // SAFETY: within the 64 pages mapped above, inherited.
            sum += unsafe { std::ptr::read_volatile((shared_at as *const u8).add(i * page as usize)) } as usize;
        }
        sum
    });
    assert_eq!(read, 64, "the fork read the shared memfd");
    let own_at = twin(16, page as usize);
    assert!(own_at != 0);
    let me = std::process::id();
    let mut pids = vec![me, fork.pid, apart.pid];
    pids.sort_unstable();

    let reader = Reader::new("/");
    let mut sample = reader.sample_of(Some(&pids)).unwrap();
    sample.shared = reader.read_shared(&pids).unwrap();
    // One object of that name is shared, by this process and the fork; `apart`'s memfd and this
    // process's second one are mapped by one process each.
    let ours: Vec<_> = sample.shared.iter().filter(|o| o.path == PATH).collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    let mut users = vec![(me, 64 * page), (fork.pid, 64 * page)];
    users.sort_unstable();
    assert_eq!(ours[0].users, users);
    assert_eq!(ours[0].ranges_of(me).collect::<Vec<_>>(), vec![(shared_at as u64, shared_at as u64 + 64 * page)]);
    // numa_maps does show both of this process's memfds under the one path.
    let vmas = sample.processes.iter().find(|p| p.pid == me).and_then(|p| p.numa_maps.as_ref()).unwrap();
    let of_path = vmas.vmas.iter().filter(|v| v.file.as_deref() == Some(PATH)).map(|v| v.start).collect::<Vec<_>>();
    assert!(of_path.contains(&(own_at as u64)) && of_path.contains(&(shared_at as u64)), "{of_path:?}");

    let mut m = Model::new(Topology::from_sysfs(std::path::Path::new("/")).unwrap(), Tunables::default());
    m.update(&sample);
    let total = |v: &[u64]| v.iter().sum::<u64>();
    let mine = &m.procs[&me].shared_objects;
    let theirs = &m.procs[&fork.pid].shared_objects;
    assert_eq!(mine.len(), 1);
    assert_eq!(total(&mine[0].by_node), 64 * page, "this process's pages of the shared memfd alone");
    assert_eq!((theirs.len(), total(&theirs[0].by_node)), (1, 64 * page));
    assert_eq!(mine[0].object, ours[0].id());
    assert!(m.procs[&apart.pid].shared_objects.is_empty(), "apart shares nothing");
    assert_eq!(total(&m.shared_twice(&[(me, 1.0), (fork.pid, 1.0)])), 64 * page);
    assert_eq!(total(&m.shared_twice(&[(me, 1.0), (apart.pid, 1.0)])), 0);
    // SAFETY: unmapping what this process mapped.
    unsafe {
        libc::munmap(shared_at as *mut libc::c_void, 64 * page as usize);
        libc::munmap(own_at as *mut libc::c_void, 16 * page as usize);
    }
}
