//! `untorn stats`: the statistics saved at a database's last clean
//! shutdown, in tables like PostgreSQL's pg_stat views, or as JSON. Reads
//! the files only (the database is not opened), under the directory's
//! shared lock: refused while an opening holds the database.

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table as Grid};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use untorn::control::{ControlFile, DbState};
use untorn::db::directory::lock_for_reading;
use untorn::file::{FileSystem, Issuer};
use untorn::stats::{read_saved, stats_path, up_to_date, SavedStatistics, Statistics};

/// What `--json` prints: the saved file and whether it is current.
#[derive(Serialize)]
struct Output<'a> {
    /// The control file's state (`shut_down`, `in_production`, ...).
    database_state: DbState,
    /// False when the figures stop at an earlier clean shutdown (the
    /// database crashed, or its last close could not save them).
    up_to_date: bool,
    #[serde(flatten)]
    saved: &'a SavedStatistics,
}

pub fn run(fs: &dyn FileSystem, dir: &Path, json: bool) -> untorn::Result<ExitCode> {
    // Held while it reads: refused while an opening holds the directory.
    let _lock = lock_for_reading(fs, dir)?;
    let control = ControlFile::read(fs, dir, Issuer::Tool)?;
    let saved = read_saved(fs, dir)?.ok_or_else(|| {
        untorn::Error::Invalid(format!(
            "{} does not exist: statistics are saved at a clean shutdown, and {} has had none since it was created or last crashed",
            stats_path(dir).display(),
            dir.display()
        ))
    })?;
    let current = up_to_date(&saved, &control);
    if json {
        let out = Output {
            database_state: control.state,
            up_to_date: current,
            saved: &saved,
        };
        let text = serde_json::to_string_pretty(&out)
            .map_err(|e| untorn::Error::Invalid(e.to_string()))?;
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    if !current {
        println!(
            "note: the database is {}; these figures are from its last clean shutdown (checkpoint {}), not current",
            control.state.describe(),
            saved.checkpoint_lsn
        );
    }
    print_text(&saved.statistics);
    Ok(ExitCode::SUCCESS)
}

fn grid(headers: &[&str], rows: Vec<Vec<String>>) -> Grid {
    let mut g = Grid::new();
    g.load_preset(UTF8_FULL_CONDENSED)
        .set_header(headers.to_vec());
    for row in rows {
        g.add_row(row);
    }
    for i in 1..headers.len() {
        if let Some(c) = g.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    g
}

/// A view of one row: a (figure, value) table under `title`.
fn view(title: &str, figures: Vec<(&str, String)>) {
    println!("\n{title}");
    let rows = figures
        .into_iter()
        .map(|(k, v)| vec![k.to_string(), v])
        .collect();
    println!("{}", grid(&["figure", "value"], rows));
}

fn print_text(s: &Statistics) {
    println!("openings covered: {}", s.openings);
    let w = &s.wal;
    view(
        "WAL (pg_stat_wal)",
        vec![
            ("records", w.records.to_string()),
            ("full-page images", w.fpi.to_string()),
            ("image bytes (as logged)", w.fpi_bytes.to_string()),
            (
                "image bytes (uncompressed)",
                w.fpi_bytes_uncompressed.to_string(),
            ),
            ("record bytes", w.bytes.to_string()),
            ("writes", w.writes.to_string()),
            (
                "bytes written (padding included)",
                w.bytes_written.to_string(),
            ),
            ("padding bytes", w.padding_bytes.to_string()),
            ("fsyncs", w.fsyncs.to_string()),
            ("flush requests (commits)", w.flush_requests.to_string()),
            ("flushes without I/O", w.flushes_without_io.to_string()),
            (
                "flush requests by page writes",
                w.page_write_flush_requests.to_string(),
            ),
            (
                "flushes led by page writes",
                w.page_write_flush_rounds.to_string(),
            ),
            ("commits per fsync", format!("{:.2}", w.commits_per_fsync)),
            ("segments created", w.segments_created.to_string()),
            ("segments recycled", w.segments_recycled.to_string()),
            ("segments removed", w.segments_removed.to_string()),
        ],
    );
    println!("\nI/O (pg_stat_io)");
    let rows =
        s.io.iter()
            .map(|r| {
                let f = &r.figures;
                vec![
                    r.issuer.name().to_string(),
                    r.kind.name().to_string(),
                    f.reads.to_string(),
                    f.read_bytes.to_string(),
                    f.writes.to_string(),
                    f.write_bytes.to_string(),
                    f.writebacks.to_string(),
                    f.writeback_bytes.to_string(),
                    f.fsyncs.to_string(),
                ]
            })
            .collect();
    let headers = [
        "issuer",
        "file kind",
        "reads",
        "read bytes",
        "writes",
        "write bytes",
        "writebacks",
        "writeback bytes",
        "fsyncs",
    ];
    let mut io = grid(&headers, rows);
    if let Some(c) = io.column_mut(1) {
        c.set_cell_alignment(CellAlignment::Left);
    }
    println!("{io}");
    let c = &s.checkpointer;
    view(
        "Checkpointer (pg_stat_checkpointer)",
        vec![
            ("timed", c.timed.to_string()),
            ("requested", c.requested.to_string()),
            ("pages written", c.pages_written.to_string()),
            ("write time (s)", format!("{:.3}", c.write_s)),
            ("sync time (s)", format!("{:.3}", c.sync_s)),
        ],
    );
    let b = &s.buffer;
    view(
        "Buffer pool",
        vec![
            ("hits", b.hits.to_string()),
            ("reads", b.reads.to_string()),
            ("evictions", b.evictions.to_string()),
            ("dirty evictions", b.dirty_evictions.to_string()),
            ("pages written", b.pages_written.to_string()),
            ("write batches", b.write_batches.to_string()),
            ("checksum failures", b.checksum_failures.to_string()),
        ],
    );
    let r = &s.recovery;
    view(
        "Recovery",
        vec![
            ("records replayed", r.records_replayed.to_string()),
            (
                "pages restored from images",
                r.pages_restored_from_images.to_string(),
            ),
            (
                "of those compressed",
                r.compressed_images_restored.to_string(),
            ),
            (
                "changes skipped by LSN",
                r.changes_skipped_by_lsn.to_string(),
            ),
            (
                "damaged pages repaired",
                r.damaged_pages_repaired.to_string(),
            ),
            (
                "pages repaired from double writes",
                r.pages_repaired_from_double_writes.to_string(),
            ),
            ("damaged pages left", r.damaged_pages_left.to_string()),
        ],
    );
    println!("\nDouble writes (by writer)");
    let rows = s
        .double_write
        .rows()
        .into_iter()
        .map(|(writer, f)| {
            vec![
                writer.to_string(),
                f.pages.to_string(),
                f.batches.to_string(),
                f.writes.to_string(),
                f.fsyncs.to_string(),
                format!("{:.1}", f.pages_per_fsync),
                f.slot_syncs.to_string(),
                f.slot_waits.to_string(),
                f.syncs_ahead.to_string(),
                f.deferred.to_string(),
                f.written_back.to_string(),
                f.obsolete.to_string(),
                f.reads.to_string(),
            ]
        })
        .collect();
    println!(
        "{}",
        grid(
            &[
                "writer",
                "pages",
                "batches",
                "writes",
                "fsyncs",
                "pages per fsync",
                "slot syncs",
                "slot waits",
                "syncs ahead",
                "deferred",
                "written back",
                "obsolete",
                "area reads",
            ],
            rows
        )
    );
    println!("\nCheckpoints of the last opening");
    let rows = s
        .checkpoint_log
        .iter()
        .map(|l| {
            vec![
                serde_json::to_value(l.reason)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                format!("{:.3}", l.started_s),
                l.pages_written.to_string(),
                l.files_synced.to_string(),
                format!("{:.3}", l.write_s),
                format!("{:.3}", l.sync_s),
                format!("{:.3}", l.total_s),
                l.distance.to_string(),
                l.redo.to_string(),
            ]
        })
        .collect();
    println!(
        "{}",
        grid(
            &[
                "reason",
                "started s",
                "pages written",
                "files synced",
                "write s",
                "sync s",
                "total s",
                "distance bytes",
                "redo",
            ],
            rows
        )
    );
}
