//! Test support, not a test target (cargo builds only `tests/*.rs`): a forked child parked on a
//! pipe, for tests that need a second real process holding what this one made (a memfd, a SysV
//! segment, a shared mapping). Included by path (`#[path = ...] mod forked;`) by the observe
//! crate's `signals_shared` and the model crate's `shared_live`, so it is in no crate's API.

/// A forked child that waits until a byte is written to its pipe (or the write end is closed
/// everywhere), then exits; dropping it releases and reaps the child.
pub struct Child {
    /// The child's pid.
    pub pid: u32,
    release: libc::c_int,
}

impl Child {
    /// Forks a child that runs `work` (async-signal-safe calls only: forking a multi-threaded
    /// test process leaves the child only those), hands its result to the parent through a pipe,
    /// then waits as above. Returns once `work` is done, with its result (`|| ()` for a child
    /// that only waits).
    pub fn fork_running<T: Copy + Default>(work: impl FnOnce() -> T) -> (Child, T) {
        let (mut p, mut r) = ([0 as libc::c_int; 2], [0 as libc::c_int; 2]);
        // SAFETY: p and r have room for two fds each.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        assert_eq!(unsafe { libc::pipe(r.as_mut_ptr()) }, 0);
        // SAFETY: the child runs only async-signal-safe calls (`work`'s, read, write, _exit).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let out = work();
            let mut b = [0u8; 1];
            // SAFETY: child side: report, wait for one byte (or the end), exit without destructors.
            unsafe {
                libc::close(p[1]);
                libc::close(r[0]);
                libc::write(r[1], (&out as *const T).cast(), size_of::<T>());
                libc::read(p[0], b.as_mut_ptr().cast(), 1);
                libc::_exit(0);
            }
        }
        let mut out = T::default();
        // SAFETY: our own pipe ends; a T-sized read into a T of plain data (`Copy`), which the
        // child wrote whole from a T.
        unsafe {
            libc::close(p[0]);
            libc::close(r[1]);
            let n = libc::read(r[0], (&mut out as *mut T).cast(), size_of::<T>());
            assert_eq!(n as usize, size_of::<T>(), "the child reports");
            libc::close(r[0]);
        }
        (Child { pid: pid as u32, release: p[1] }, out)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // A byte releases the child (its read returns), then waitpid reaps it. Closing alone is not
        // enough: a child another test forked meanwhile holds a copy of this write end, and parked
        // on its own pipe it would hold it forever, while this child holds that test's (the observe
        // crate's signals_shared tests hung so in CI's order until the byte).
        // SAFETY: our own pipe end, one byte from a live buffer.
        unsafe {
            libc::write(self.release, b"x".as_ptr().cast(), 1);
            libc::close(self.release);
            libc::waitpid(self.pid as libc::pid_t, std::ptr::null_mut(), 0);
        }
    }
}
