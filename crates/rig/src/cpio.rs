//! A writer for the `newc` cpio format, the one format the kernel unpacks as an initramfs.
//!
//! Problem: the initramfs must hold files owned by root with exact modes, symlinks, and `/dev/console`, whoever
//! builds it; packing a staging directory with the `cpio` tool would need root-owned files and `mknod` on the host.
//! Approach: write the archive directly. Each entry is a 110-byte ASCII header, the NUL-terminated name padded to a
//! multiple of 4 bytes, then the data padded to 4; the archive ends with the entry `TRAILER!!!`.
//!
//! ```text
//!  "070701" ino mode uid gid nlink mtime filesize devmaj devmin rdevmaj rdevmin namesize check
//!   6 chars + 13 fields of 8 hex digits = 110 bytes | name\0 pad4 | data pad4 | next header ...
//! ```
//!
//! The kernel unpacks several archives concatenated one after another (init/initramfs.c reads until the input
//! ends), so the rig builds the large common part once and appends a small per-guest archive with the scenario.
//! Parent directories are added implicitly, once each, in order. Timestamps are 0 so the output is reproducible.
//! Format facts from the kernel's Documentation/driver-api/early-userspace/buffer-format.rst.

use std::collections::BTreeSet;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// An archive being built in memory.
#[derive(Debug, Default)]
pub struct Archive {
    out: Vec<u8>,
    dirs: BTreeSet<String>,
    next_ino: u32,
    names: BTreeSet<String>,
}

impl Archive {
    /// An empty archive.
    pub fn new() -> Self {
        Archive { next_ino: 1, ..Default::default() }
    }

    fn norm(path: &str) -> String {
        path.trim_start_matches('/').trim_end_matches('/').to_string()
    }

    fn header(&mut self, name: &str, mode: u32, nlink: u32, size: usize, rdev: (u32, u32)) {
        let ino = self.next_ino;
        self.next_ino += 1;
        let namesize = name.len() + 1;
        let fields = [ino, mode, 0, 0, nlink, 0, size as u32, 0, 0, rdev.0, rdev.1, namesize as u32, 0];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while self.out.len() % 4 != 0 {
            self.out.push(0);
        }
    }

    /// Adds the missing parent directories of `name` (mode 0755).
    fn parents(&mut self, name: &str) {
        let mut acc = String::new();
        let parts: Vec<&str> = name.split('/').collect();
        for p in &parts[..parts.len().saturating_sub(1)] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(p);
            if self.dirs.insert(acc.clone()) {
                let d = acc.clone();
                self.header(&d, S_IFDIR | 0o755, 2, 0, (0, 0));
            }
        }
    }

    fn entry(&mut self, path: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        let name = Self::norm(path);
        assert!(!name.is_empty() && !name.split('/').any(|c| c.is_empty() || c == ".."), "bad path {path:?}");
        self.parents(&name);
        if mode & 0o170000 == S_IFDIR {
            if !self.dirs.insert(name.clone()) {
                return;
            }
        } else {
            // A later entry with the same name would replace the earlier one when unpacked; we never want that
            // silently inside one archive.
            assert!(self.names.insert(name.clone()), "duplicate cpio entry {name:?}");
        }
        let nlink = if mode & 0o170000 == S_IFDIR { 2 } else { 1 };
        self.header(&name, mode, nlink, data.len(), rdev);
        self.out.extend_from_slice(data);
        self.pad();
    }

    /// Adds a directory (and its parents).
    pub fn dir(&mut self, path: &str, perm: u32) {
        self.entry(path, S_IFDIR | (perm & 0o7777), &[], (0, 0));
    }

    /// Adds a regular file with `perm` (e.g. 0o755).
    pub fn file(&mut self, path: &str, perm: u32, data: &[u8]) {
        self.entry(path, S_IFREG | (perm & 0o7777), data, (0, 0));
    }

    /// Adds a symbolic link at `path` pointing to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.entry(path, S_IFLNK | 0o777, target.as_bytes(), (0, 0));
    }

    /// Adds a character device node.
    pub fn char_dev(&mut self, path: &str, perm: u32, major: u32, minor: u32) {
        self.entry(path, S_IFCHR | (perm & 0o7777), &[], (major, minor));
    }

    /// Whether a file, link or device named `path` was added.
    pub fn contains(&self, path: &str) -> bool {
        let n = Self::norm(path);
        self.names.contains(&n) || self.dirs.contains(&n)
    }

    /// Ends the archive with its trailer and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.header("TRAILER!!!", 0, 1, 0, (0, 0));
        // The kernel accepts any length; pad to 512 like the cpio tool so other readers are happy too.
        while self.out.len() % 512 != 0 {
            self.out.push(0);
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads back (name, mode, data) of every entry, to check the layout without external tools.
    fn entries(b: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let mut v = Vec::new();
        let mut i = 0;
        loop {
            assert_eq!(&b[i..i + 6], b"070701", "magic at {i}");
            let field = |k: usize| {
                u32::from_str_radix(std::str::from_utf8(&b[i + 6 + 8 * k..i + 14 + 8 * k]).unwrap(), 16).unwrap()
            };
            let (mode, size, namesize) = (field(1), field(6) as usize, field(11) as usize);
            let name = String::from_utf8(b[i + 110..i + 110 + namesize - 1].to_vec()).unwrap();
            let data_at = (i + 110 + namesize).div_ceil(4) * 4;
            if name == "TRAILER!!!" {
                return v;
            }
            v.push((name, mode, b[data_at..data_at + size].to_vec()));
            i = (data_at + size).div_ceil(4) * 4;
        }
    }

    #[test]
    fn layout_parents_and_padding() {
        let mut a = Archive::new();
        a.file("/usr/bin/tool", 0o755, b"abcde");
        a.symlink("/bin/sh", "busybox");
        a.char_dev("/dev/console", 0o600, 5, 1);
        a.dir("/usr", 0o755);
        let b = a.finish();
        assert_eq!(b.len() % 512, 0);
        let e = entries(&b);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(names, ["usr", "usr/bin", "usr/bin/tool", "bin", "bin/sh", "dev", "dev/console"]);
        assert_eq!(e[2].1, 0o100755);
        assert_eq!(e[2].2, b"abcde");
        assert_eq!(e[4].1, 0o120777);
        assert_eq!(e[4].2, b"busybox");
        assert_eq!(e[6].1, 0o020600);
    }

    #[test]
    #[should_panic(expected = "duplicate cpio entry")]
    fn duplicate_file_is_a_bug() {
        let mut a = Archive::new();
        a.file("x", 0o644, b"1");
        a.file("/x", 0o644, b"2");
    }

    /// Cross-check with the real cpio tool when it is installed (the rig installs it).
    #[test]
    fn cpio_tool_lists_it() {
        let Ok(out) = std::process::Command::new("cpio").arg("--version").output() else {
            eprintln!("skipped: cpio not installed");
            return;
        };
        assert!(out.status.success());
        let mut a = Archive::new();
        a.file("etc/hello", 0o644, b"hello\n");
        a.symlink("bin/sh", "busybox");
        let bytes = a.finish();
        let mut child = std::process::Command::new("cpio")
            .args(["-it", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "etc\netc/hello\nbin\nbin/sh\n");
    }
}
