//! The crash laboratory's driver for real databases (scripts/crash-external,
//! issue 38) end to end on `untorn serve`, the one system it runs without
//! root: load, snapshot, record pgbench under the recorder, SIGKILL, build
//! torn and untorn images in batches, check each with `untorn check` and
//! the acknowledged-commit oracle. PostgreSQL and MariaDB need root and
//! minutes; their campaigns are in docs/RELIABILITY.md.

mod common;

use std::process::Command;

#[test]
fn the_driver_power_cuts_untorn_serve_and_every_image_keeps_its_commits() {
    common::serve::client("pgbench"); // installed by scripts/install-clients
    let t = tempfile::tempdir().unwrap();
    let json = t.path().join("result.json");
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/crash-external"
    ))
    .args([
        "untorn",
        "--modes",
        "full_pages",
        "--torn",
        "3",
        "--untorn",
        "2",
    ])
    .args([
        "--batch",
        "2",
        "--duration",
        "5",
        "--kill-after",
        "3",
        "--seed",
        "5",
    ])
    .arg("--untorn-bin")
    .arg(env!("CARGO_BIN_EXE_untorn"))
    .arg("--work")
    .arg(t.path())
    .arg("--json")
    .arg(&json)
    .output()
    .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let result: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = result["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{text}");
    for (row, (kind, count)) in rows.iter().zip([("torn", 3), ("untorn", 2)]) {
        assert_eq!(row["images"], kind);
        assert_eq!(row["count"], count);
        // full_pages: every image recovers, keeps every acknowledged commit
        // and its sums, and passes its checks.
        assert_eq!(row["recovered"], count, "{text}");
        assert_eq!(row["lost_commits"], 0, "{text}");
        assert_eq!(row["silently_wrong"], 0, "{text}");
        assert_eq!(row["unrecorded_changes"], serde_json::json!([]), "{text}");
        assert!(row["acknowledged"].as_u64().unwrap() > 10, "{text}");
        // Image numbers run on across batches.
        let names: Vec<&str> = row["checked"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["image"].as_str().unwrap().rsplit('/').next().unwrap())
            .collect();
        let want: Vec<String> = (0..count).map(|i| format!("image{i:03}")).collect();
        assert_eq!(names, want);
    }
    assert!(text.contains("silently wrong"), "no table: {text}");
}
