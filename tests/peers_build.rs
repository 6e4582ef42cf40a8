//! The PostgreSQL build step of the peers laboratory (scripts/pg-build, also
//! reached as `scripts/peers --build`), checked through its `--plan`, which
//! resolves the source and prints what would be built and where without
//! building anything: CI builds no PostgreSQL (issue 37). The real builds
//! and runs are commands recorded in docs/BENCHMARKS.md.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

fn run(cache: &Path, script_name: &str, args: &[&str]) -> Output {
    Command::new("python3")
        .arg(script(script_name))
        .args(args)
        .env("UNTORN_PG_CACHE", cache)
        .output()
        .expect("python3 runs")
}

fn plan(cache: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--plan");
    let out = run(cache, "pg-build", &all);
    assert!(
        out.status.success(),
        "pg-build {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the plan is JSON")
}

/// A directory that looks like a PostgreSQL source tree to the plan.
fn fake_tree(dir: &Path, version: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("configure"),
        format!("#!/bin/sh\nPACKAGE_VERSION='{version}'\n"),
    )
    .unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn plan_of_a_tree_names_options_and_cache_key() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let src = tmp.path().join("src");
    fake_tree(&src, "19devel");
    let src_s = src.to_str().unwrap();

    let p8 = plan(&cache, &["pg19dev", "--source", src_s]);
    assert_eq!(p8["name"], "pg19dev");
    assert_eq!(p8["version"], "19devel");
    assert_eq!(p8["cached"], false);
    let key8 = p8["key"].as_str().unwrap().to_string();
    let prefix = cache.join(format!("pg19dev-{key8}"));
    assert_eq!(p8["prefix"], prefix.to_str().unwrap());
    assert_eq!(p8["link"], cache.join("pg19dev").to_str().unwrap());
    let conf = strings(&p8["configure"]);
    for want in [
        &format!("--prefix={}", prefix.display()),
        "--with-lz4",
        "--with-wal-blocksize=8",
        "CFLAGS=-O2",
    ] {
        assert!(conf.iter().any(|c| c == want), "{want} missing in {conf:?}");
    }
    assert!(!conf.iter().any(|c| c.contains("enable-debug")), "{conf:?}");

    // Another WAL block size: another name, another key, the same source.
    let p16 = plan(
        &cache,
        &["pg19dev", "--source", src_s, "--wal-blocksize", "16"],
    );
    assert_eq!(p16["name"], "pg19dev-wal16k");
    assert_ne!(p16["key"], p8["key"]);
    assert!(strings(&p16["configure"]).contains(&"--with-wal-blocksize=16".to_string()));
    // The same source and options: the same key (what makes a second call instant).
    assert_eq!(
        plan(&cache, &["pg19dev", "--source", src_s])["key"],
        p8["key"]
    );
    // Another version of the tree: another key.
    fake_tree(&src, "19beta1");
    assert_ne!(
        plan(&cache, &["pg19dev", "--source", src_s])["key"],
        p8["key"]
    );
}

#[test]
fn plan_of_a_git_directory_is_keyed_by_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let repo = tmp.path().join("repo");
    fake_tree(&repo, "19devel");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "configure"]);
    git(&repo, &["commit", "-q", "-m", "unpatched"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(repo.join("dwbuf.c"), "/* the patch */\n").unwrap();
    git(&repo, &["add", "dwbuf.c"]);
    git(&repo, &["commit", "-q", "-m", "patched"]);
    let patched = git(&repo, &["rev-parse", "HEAD"]);
    let r = repo.to_str().unwrap();

    let dev = plan(&cache, &["pg19dev", "--source", r, "--commit", &base[..10]]);
    let dwb = plan(
        &cache,
        &["pg19dev-dwb", "--source", r, "--commit", &patched],
    );
    assert_eq!(dev["source"], format!("git:{base}"));
    assert_eq!(dwb["source"], format!("git:{patched}"));
    assert_eq!(dwb["name"], "pg19dev-dwb");
    assert_ne!(dev["key"], dwb["key"]);
    // Without --commit: HEAD.
    assert_eq!(
        plan(&cache, &["x", "--source", r])["source"],
        format!("git:{patched}")
    );
    // The same through the peers runner.
    let out = run(
        &cache,
        "peers",
        &[
            "--build", "pg19dev", "--source", r, "--commit", &base, "--plan",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let via: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(via["key"], dev["key"]);
}

#[test]
fn plan_of_debians_source_package_fetches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan(
        tmp.path(),
        &[
            "pg15.18",
            "--source",
            "debian:15.18-0+deb12u1",
            "--wal-blocksize",
            "1",
        ],
    );
    assert_eq!(p["name"], "pg15.18-wal1k");
    assert_eq!(p["source"], "debian:postgresql-15=15.18-0+deb12u1");
    assert_eq!(p["version"], "15.18");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn a_missing_source_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-tree");
    for args in [
        vec!["pg19dev", "--source", missing.to_str().unwrap(), "--plan"],
        vec!["pg19dev", "--source", missing.to_str().unwrap()],
    ] {
        let out = run(tmp.path(), "pg-build", &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("does not exist"), "{err}");
        assert!(!err.contains("Traceback"), "{err}");
    }
    // A directory that is no PostgreSQL tree, and a bad block size.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = run(
        tmp.path(),
        "pg-build",
        &["x", "--source", empty.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no configure script"));
    let out = run(
        tmp.path(),
        "pg-build",
        &[
            "x",
            "--source",
            "debian:15.18",
            "--wal-blocksize",
            "3",
            "--plan",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    // The peers runner names the build step for a system it does not know.
    let out = run(
        tmp.path(),
        "peers",
        &["--systems", "pg19dev-dwb", "--no-install"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--build pg19dev-dwb --source"), "{err}");
}

#[test]
fn a_patch_is_applied_to_a_copy_and_keys_the_build() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let src = tmp.path().join("src");
    fake_tree(&src, "15.18");
    std::fs::write(src.join("bufmgr.c"), "sort_checkpoint_bufferids();\n").unwrap();
    let patch = tmp.path().join("sort.patch");
    std::fs::write(
        &patch,
        "--- a/bufmgr.c\n+++ b/bufmgr.c\n@@ -1 +1,2 @@\n-sort_checkpoint_bufferids();\n\
         +if (checkpoint_sort)\n+\tsort_checkpoint_bufferids();\n",
    )
    .unwrap();
    let (src_s, patch_s) = (src.to_str().unwrap(), patch.to_str().unwrap());

    let plain = plan(&cache, &["pg15", "--source", src_s]);
    let patched = plan(
        &cache,
        &["pg15-sort", "--source", src_s, "--patch", patch_s],
    );
    assert_ne!(plain["key"], patched["key"]);
    assert_eq!(plain["patches"], serde_json::json!([]));
    assert_eq!(patched["patches"][0]["file"], patch_s);
    assert_eq!(
        patched["patches"][0]["sha256"].as_str().unwrap().len(),
        64,
        "{patched}"
    );

    // The patched source is a copy; the tree given stays as it was.
    let source_only = || {
        run(
            &cache,
            "pg-build",
            &[
                "pg15-sort",
                "--source",
                src_s,
                "--patch",
                patch_s,
                "--source-only",
            ],
        )
    };
    let out = source_only();
    assert!(out.status.success(), "{out:?}");
    let copy = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(copy.starts_with(&cache), "{copy:?}");
    let text = std::fs::read_to_string(copy.join("bufmgr.c")).unwrap();
    assert!(text.contains("if (checkpoint_sort)"), "{text}");
    assert_eq!(
        std::fs::read_to_string(src.join("bufmgr.c")).unwrap(),
        "sort_checkpoint_bufferids();\n"
    );

    // Another patch's contents: another key. One that does not apply: exit 1, no copy left.
    std::fs::write(
        &patch,
        "--- a/bufmgr.c\n+++ b/bufmgr.c\n@@ -1 +1 @@\n-no such line\n+x\n",
    )
    .unwrap();
    let other = plan(
        &cache,
        &["pg15-sort", "--source", src_s, "--patch", patch_s],
    );
    assert_ne!(other["key"], patched["key"]);
    let out = source_only();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("does not apply"), "{err}");
    let left: Vec<_> = std::fs::read_dir(cache.join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "only the first copy: {left:?}");

    // A missing patch, and a file that is no diff: exit 2 before anything is done.
    for bad in [tmp.path().join("missing.patch"), src.join("bufmgr.c")] {
        let out = run(
            &cache,
            "pg-build",
            &[
                "x",
                "--source",
                src_s,
                "--patch",
                bad.to_str().unwrap(),
                "--plan",
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--patch"), "{err}");
        assert!(!err.contains("Traceback"), "{err}");
    }
}

#[test]
fn our_checkpoint_sort_patch_is_a_diff_the_plan_accepts() {
    // It applies to Debian's 15.18 (the build in docs/STUDIES.md); CI fetches no source,
    // so here only its form: the three files it changes and the setting it adds.
    let tmp = tempfile::tempdir().unwrap();
    let patch = script("pg-patches").join("checkpoint_sort-15.patch");
    let text = std::fs::read_to_string(&patch).unwrap();
    for file in [
        "src/backend/storage/buffer/bufmgr.c",
        "src/backend/utils/misc/guc.c",
        "src/include/storage/bufmgr.h",
    ] {
        assert!(text.contains(&format!("+++ b/{file}\n")), "{file}");
    }
    assert!(text.contains("+\tif (checkpoint_sort)\n+\t\tsort_checkpoint_bufferids("));
    let p = plan(
        tmp.path(),
        &[
            "pg15.18-ckptsort",
            "--source",
            "debian:15.18-0+deb12u1",
            "--patch",
            patch.to_str().unwrap(),
        ],
    );
    assert_eq!(p["patches"][0]["file"], patch.to_str().unwrap());
}
