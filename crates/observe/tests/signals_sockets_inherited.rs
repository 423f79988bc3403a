//! A socketpair whose two ends both stay open in the parent and in a forked child (a common lazy
//! pattern) is still a pair of the two processes: the fd scan looks at every holder of an inode.

use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use numapilot_observe::sockets::{scan, unix_peers};

#[test]
fn both_ends_held_by_both_processes() {
    let (a, b) = UnixStream::pair().unwrap();
    let (a, b) = (a.into_raw_fd(), b.into_raw_fd());
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: room for two fds.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    // SAFETY: the child calls only async-signal-safe functions and keeps both ends.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let mut x = [0u8; 1];
        unsafe {
            libc::close(p[1]);
            libc::read(p[0], x.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY: our pipe end.
    unsafe { libc::close(p[0]) };
    let me = std::process::id();
    let child = pid as u32;
    let got = scan(Path::new("/"), &[me, child], Some(&unix_peers().unwrap())).unwrap();
    let (lo, hi) = (me.min(child), me.max(child));
    let pair = got.comm.iter().find(|c| c.a == (lo, lo) && c.b == (hi, hi));
    // holders(a) = holders(b) = {me, child}: (me, child) and (child, me), two combinations.
    assert_eq!(pair.map(|c| c.events), Some(2), "{got:?}");
    // SAFETY: release and reap the child; close our ends.
    unsafe {
        libc::close(p[1]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
        libc::close(a);
        libc::close(b);
    }
}
