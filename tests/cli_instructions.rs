//! End-to-end test of `untorn bench --instrument instructions` on the
//! real binary: its structure (two counted runs per configuration under
//! Callgrind, the client thread apart), not a figure.

mod common;

use common::untorn;

#[test]
fn instructions_are_counted_per_transaction_with_the_client_apart() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("instructions.json");
    let out = untorn([
        "bench".as_ref(),
        "--instrument".as_ref(),
        "instructions".as_ref(),
        "--workload".as_ref(),
        "oltp_update_non_index".as_ref(),
        "--protection".as_ref(),
        "off,full_pages".as_ref(),
        "--tables".as_ref(),
        "1".as_ref(),
        "--table-size".as_ref(),
        "500".as_ref(),
        "--transactions".as_ref(),
        "20".as_ref(),
        "--dir".as_ref(),
        dir.path().join("work").as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
    ]);
    out.expect_code(0)
        .expect_stdout("instructions per transaction (Callgrind")
        .expect_stdout("full_pages checksums crc32c");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let figures = v.as_array().expect("an array of figures");
    assert_eq!(figures.len(), 2, "{v:#}");
    for f in figures {
        let p = &f["per_transaction"];
        let (short, long) = (&p["short"], &p["long"]);
        // The longer run counted more on the client thread, the engine's
        // threads were counted apart, and the figure is their difference.
        assert!(long["client"].as_u64() > short["client"].as_u64(), "{f:#}");
        assert!(short["threads"].as_u64().unwrap() >= 2, "{f:#}");
        assert!(short["background"].as_u64().unwrap() > 0, "{f:#}");
        let diff = long["client"].as_u64().unwrap() - short["client"].as_u64().unwrap();
        assert_eq!(p["transactions"], 20, "{f:#}");
        assert_eq!(p["client"].as_f64().unwrap(), diff as f64 / 20.0, "{f:#}");
    }
    assert_eq!(figures[0]["ratio_to_first"], 1.0);
    assert!(figures[1]["config"]
        .as_str()
        .unwrap()
        .starts_with("full_pages"));
}
