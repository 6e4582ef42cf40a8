//! Building the recorder library and running programs under it.
//!
//! The C source is compiled into the crate, and built with the system's C
//! compiler when first needed (not by build.rs), so `cargo build` works
//! on a machine without gcc; only recording needs one.

use std::io::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The recorder's C source (see its header for what it intercepts).
pub const SOURCE: &str = include_str!("record.c");

/// Builds the recorder into `dir` (once per source: the file name carries
/// a hash of it) and returns the library's path. `CC` names the compiler
/// (default `cc`).
pub fn build(dir: &Path) -> Result<PathBuf> {
    let hash = SOURCE.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let lib = dir.join(format!("untorn_record-{hash:016x}.so"));
    if lib.exists() {
        return Ok(lib);
    }
    std::fs::create_dir_all(dir)?;
    let src = dir.join(format!("untorn_record-{hash:016x}.c"));
    std::fs::write(&src, SOURCE)?;
    // Built beside its final name and renamed, so concurrent builders
    // never load a half-written library.
    let tmp = dir.join(format!(
        "untorn_record-{hash:016x}.{}.tmp",
        std::process::id()
    ));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(&tmp)
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(|e| Error::other(format!("the recorder needs a C compiler ({cc}): {e}")))?;
    if !out.status.success() {
        return Err(Error::other(format!(
            "building the recorder with {cc} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::rename(&tmp, &lib)?;
    Ok(lib)
}

/// Sets the environment that records `command`'s calls under `dir` into
/// `log` (both absolute).
pub fn under_recorder(command: &mut Command, lib: &Path, dir: &Path, log: &Path) {
    command
        .env("LD_PRELOAD", lib)
        .env("UNTORN_RECORD_DIR", dir)
        .env("UNTORN_RECORD_LOG", log);
}
