//! `untorn probe` (issue 40): statx's atomic-write figures and the verdict
//! for a page, on this machine's disk and on XFS loop devices with and
//! without reflink (XFS's software fallback for RWF_ATOMIC needs reflink).
//! The loop-device test needs root, /dev/loop-control and mkfs.xfs
//! (scripts/install-clients installs xfsprogs as root); where one is
//! missing it says which on stderr instead of checking anything.

mod common;

use common::xfs::XfsLoop;

use std::path::Path;
use std::process::Command;

fn probe(path: &Path) -> serde_json::Value {
    let run = common::untorn_on("probe", path, &["--json"]);
    assert_eq!(run.code, Some(0), "{}", run.context());
    serde_json::from_str(&run.stdout).unwrap()
}

fn fs_type(path: &Path) -> String {
    let out = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_probe_reports_no_atomic_page_on_file_systems_without_it() {
    let t = tempfile::tempdir().unwrap();
    let v = probe(t.path());
    let fs = fs_type(t.path());
    // ext4 (stat says ext2/ext3), overlay and tmpfs have no atomic writes.
    if ["ext2/ext3", "overlayfs", "tmpfs"].contains(&fs.as_str()) {
        assert_eq!(v["page_writes"], "unsupported", "{fs}: {v}");
        assert_eq!(v["statx"]["unit_max"], 0, "{fs}: {v}");
    }
    assert_eq!(v["page_size"], 8192);
    // A path that does not exist is an error naming it, not a panic.
    let run = common::untorn_on("probe", &t.path().join("absent"), &[]);
    assert_eq!(run.code, Some(2), "{}", run.context());
    assert!(run.stderr.contains("absent"), "{}", run.stderr);
}

#[test]
fn xfs_with_reflink_offers_atomic_pages_through_its_fallback_and_without_none() {
    let with = match XfsLoop::new(true) {
        Ok(x) => x,
        Err(why) => {
            eprintln!("CANNOT RUN the XFS loop-device probe: {why}");
            return;
        }
    };
    let file = with.mount.join("data");
    std::fs::write(&file, b"").unwrap();
    let v = probe(&file);
    assert_eq!(fs_type(&with.mount), "xfs");
    assert_eq!(v["statx"]["reported"], true, "{v}");
    assert_eq!(v["statx"]["unit_min"], 4096, "{v}");
    assert!(v["statx"]["unit_max"].as_u64().unwrap() >= 8192, "{v}");
    // A loop device has no hardware atomic writes: the fallback.
    assert_eq!(v["statx"]["unit_max_opt"], 0, "{v}");
    assert_eq!(v["page_writes"], "software_fallback", "{v}");
    // Pages below the unit (4 KB is the least) are not atomic.
    let small = common::untorn_on("probe", &file, &["--json", "--page-size", "2KB"]);
    assert!(small.stdout.contains("\"unsupported\""), "{}", small.stdout);

    let without = XfsLoop::new(false).expect("a second XFS loop device");
    let file = without.mount.join("data");
    std::fs::write(&file, b"").unwrap();
    let v = probe(&file);
    assert_eq!(v["page_writes"], "unsupported", "{v}");
}
