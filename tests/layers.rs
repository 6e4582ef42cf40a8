//! The house has no arrow up: scripts/layer-arrows places every file of
//! src/ on its floor of docs/ARCHITECTURE.md's layer table and must find
//! no import of a higher floor outside its allowed list (issue 42).

use std::process::Command;

#[test]
fn no_import_runs_up_the_layers() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg("scripts/layer-arrows")
        .current_dir(root)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "imports up the layers (or files with no floor):\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The tool read the tree: it counts the arrows it saw.
    let all: usize = text
        .split(" arrows in all")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a count of arrows");
    assert!(all > 100, "{text}");
}
