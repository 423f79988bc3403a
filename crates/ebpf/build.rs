//! Compiles the BPF program (src/bpf/wakeup.bpf.c) with clang when the `ebpf` feature is on.
//!
//! Plain clang instead of libbpf-cargo: the program needs no skeleton (the crate opens the object from memory and
//! finds its two maps and one program by name), and libbpf-cargo would add a second libbpf-rs/libbpf-sys build in
//! the build-dependency graph plus its own dependencies, for nothing the tracer uses.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/bpf/wakeup.bpf.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    if std::env::var_os("CARGO_FEATURE_EBPF").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("wakeup.bpf.o");
    let clang = std::env::var_os("CLANG").unwrap_or_else(|| "clang".into());
    // -g: clang emits BTF for the object, which libbpf needs for the BTF-defined maps. -O2: the verifier needs
    // the optimised code (unoptimised BPF spills pointers in ways it rejects).
    let status = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror", "-c", "src/bpf/wakeup.bpf.c", "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("clang failed ({s}) compiling src/bpf/wakeup.bpf.c for the ebpf feature"),
        Err(e) => panic!(
            "the ebpf feature needs clang to compile src/bpf/wakeup.bpf.c, but running {:?} failed: {e} \
             (scripts/setup.sh installs it: apt-get install clang libbpf-dev libelf-dev zlib1g-dev)",
            clang
        ),
    }
}
