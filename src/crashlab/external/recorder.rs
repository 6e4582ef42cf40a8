//! Building the recorder library and running programs under it.
//!
//! The C source is compiled into the crate, and built with the system's C
//! compiler when first needed (not by build.rs), so `cargo build` works
//! on a machine without gcc; only recording needs one.

use std::io::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

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
    // Source and library are written under a name of this call's own and
    // the library renamed into place, so concurrent builders (tests are
    // threads of one process) never share a half-written file.
    static BUILDS: AtomicU64 = AtomicU64::new(0);
    let own = format!(
        "untorn_record-{hash:016x}.{}.{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    );
    let src = dir.join(format!("{own}.c"));
    std::fs::write(&src, SOURCE)?;
    let tmp = dir.join(format!("{own}.tmp"));
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
    let _ = std::fs::remove_file(&src);
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

#[cfg(test)]
mod tests {
    use super::*;

    // CI failed when two tests built the recorder at once: they shared
    // one temporary name, and the second rename found nothing.
    #[test]
    fn concurrent_builds_into_one_directory_all_succeed() {
        if Command::new("cc").arg("--version").output().is_err() {
            eprintln!("CANNOT RUN: no C compiler");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let libs: Vec<PathBuf> = std::thread::scope(|s| {
            let builders: Vec<_> = (0..4).map(|_| s.spawn(|| build(t.path()))).collect();
            builders
                .into_iter()
                .map(|b| b.join().unwrap().expect("every builder succeeds"))
                .collect()
        });
        assert!(libs.iter().all(|l| l == &libs[0] && l.is_file()));
        let left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![libs[0].file_name().unwrap().to_owned()]);
    }
}
