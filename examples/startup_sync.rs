//! What the fsync at the start of recovery costs (issue 9, hole 1): a
//! database of the default bench job's size (4 sysbench tables of 25,000
//! rows, a 64 MB buffer pool), written to by oltp_write_only, dropped
//! without a shutdown checkpoint (an unclean shutdown: the dirty pages the
//! pool wrote stay unsynced in the page cache), then opened again; each
//! round prints how long the startup fsync took and the whole open.
//!
//! `cargo run --release --example startup_sync -- [DIR] [ROUNDS] [TXNS]`

use std::path::PathBuf;
use std::time::Instant;
use untorn::lab::workload::{self, Rng, Scale};
use untorn::{Database, Options};

fn main() -> untorn::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let base = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let txns: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5000);
    let dir = tempfile::tempdir_in(base).expect("a temporary directory");
    let path = dir.path().join("db");
    let options = Options {
        buffer_pool_size: 64 << 20,
        ..Options::default()
    };
    let scale = Scale {
        tables: 4,
        table_size: 25_000,
        ..Scale::default()
    };
    let w = workload::by_name("oltp_write_only", &scale)?;
    let db = untorn::lab::runner::fresh_database(&path, options.clone(), w.as_ref())?;
    db.close()?;
    println!("round, startup fsync ms, files fsynced, whole open ms, records replayed");
    for round in 0..rounds {
        let db = Database::open(&path, options.clone())?;
        let tables = w.tables(&db)?;
        let mut rng = Rng::new(round as u64, 0);
        for _ in 0..txns {
            w.transaction(&db, &tables, &mut rng, 0)?;
        }
        drop(tables);
        drop(db); // no shutdown checkpoint: the next open recovers
        let start = Instant::now();
        let db = Database::open(&path, options.clone())?;
        let open_ms = start.elapsed().as_secs_f64() * 1e3;
        let r = &db.recovery;
        println!(
            "{round}, {:.1}, {}, {open_ms:.1}, {}",
            r.startup_sync_ms, r.startup_sync_files, r.records_replayed
        );
        db.close()?;
    }
    Ok(())
}
