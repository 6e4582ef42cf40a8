//! `untorn waldump`: WAL records, like pg_waldump.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use untorn::control::ControlFile;
use untorn::db::directory::{lock_for_reading, wal_config, WAL_DIR};
use untorn::file::{FileSystem, Issuer};
use untorn::wal::{first_segment_start, ImageCompression, ReadRecord, WalReader};
use untorn::{Error, Lsn};

#[derive(Default)]
struct KindTotals {
    count: u64,
    record_bytes: u64,
    fpi: u64,
    fpi_bytes: u64,
}

pub fn run(
    fs: Arc<dyn FileSystem>,
    dir: &Path,
    start: Option<&str>,
    stats: bool,
    limit: Option<u64>,
) -> untorn::Result<ExitCode> {
    // Held while it reads: an opening could recycle a segment under it.
    let _lock = lock_for_reading(fs.as_ref(), dir)?;
    let control = ControlFile::read(fs.as_ref(), dir, Issuer::Tool)?;
    let cfg = wal_config(&control);
    let page_size = control.settings.page_size as usize;
    let wal_dir = dir.join(WAL_DIR);
    let start = match start {
        Some(s) => s.parse::<Lsn>().map_err(Error::Invalid)?,
        None => first_segment_start(fs.as_ref(), &wal_dir, &cfg)?
            .ok_or_else(|| Error::Invalid(format!("no WAL segments in {}", wal_dir.display())))?,
    };
    let mut reader = WalReader::new(fs, &wal_dir, &cfg, start)?.with_issuer(Issuer::Tool);
    let mut totals: BTreeMap<&'static str, KindTotals> = BTreeMap::new();
    let mut n = 0u64;
    while let Some(rec) = reader.next()? {
        if stats {
            let t = totals.entry(rec.data.kind.name()).or_default();
            let (fpi, fpi_bytes) = rec.data.images();
            t.count += 1;
            t.record_bytes += rec.total_len as u64;
            t.fpi += fpi;
            t.fpi_bytes += fpi_bytes;
        } else {
            println!("{}", describe(&rec, page_size));
        }
        n += 1;
        if limit.is_some_and(|l| n >= l) {
            break;
        }
    }
    if stats {
        print_stats(&totals);
    }
    match reader.end() {
        Some((at, why)) => eprintln!("waldump: end of valid WAL at {at}: {why}"),
        None => eprintln!(
            "waldump: stopped after {n} records at {}",
            reader.position()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(rec: &ReadRecord, page_size: usize) -> String {
    let d = &rec.data;
    let mut line = format!(
        "kind: {:<16} len (rec/tot): {:>6}/{:>6}, tx: {:>8}, lsn: {}, prev {}, desc: blocks {}",
        d.kind.name(),
        d.main.len(),
        rec.total_len,
        d.xid,
        rec.lsn,
        rec.prev_lsn,
        d.blocks.len()
    );
    if d.kind == untorn::wal::RecordKind::Checkpoint {
        if let Ok(info) = untorn::checkpoint::CheckpointInfo::decode(&d.main, rec.lsn) {
            line += &format!(
                ", redo {}; next xid {}; next file {}; {}",
                info.redo,
                info.next_xid,
                info.next_file_id,
                if info.shutdown { "shutdown" } else { "online" }
            );
        }
    }
    for (i, b) in d.blocks.iter().enumerate() {
        line += &format!("; blkref #{i}: file {} blk {}", b.file_id, b.block);
        if let Some(img) = &b.image {
            // As pg_waldump: the method and, for a compressed image, its
            // size before compression (the page less its hole).
            let raw = page_size.saturating_sub(img.hole_length as usize);
            let sizes = match img.compression {
                ImageCompression::None => format!("{} bytes", img.bytes.len()),
                _ => format!("{} bytes, {raw} bytes uncompressed", img.bytes.len()),
            };
            line += &format!(
                " FPW [image {sizes}, hole: offset {}, length {}, compression {}]",
                img.hole_offset,
                img.hole_length,
                img.compression.name()
            );
        }
        if !b.data.is_empty() {
            line += &format!(" data {} bytes", b.data.len());
        }
    }
    line
}

fn print_stats(totals: &BTreeMap<&'static str, KindTotals>) {
    let all_count: u64 = totals.values().map(|t| t.count).sum();
    let all_bytes: u64 = totals.values().map(|t| t.record_bytes).sum();
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    println!(
        "{:<18} {:>10} {:>8} {:>14} {:>8} {:>10} {:>14}",
        "Type", "N", "(%)", "Record size", "(%)", "FPI", "FPI size"
    );
    println!(
        "{:-<18} {:->10} {:->8} {:->14} {:->8} {:->10} {:->14}",
        "", "", "", "", "", "", ""
    );
    for (kind, t) in totals {
        println!(
            "{:<18} {:>10} {:>7.2}% {:>14} {:>7.2}% {:>10} {:>14}",
            kind,
            t.count,
            pct(t.count, all_count),
            t.record_bytes,
            pct(t.record_bytes, all_bytes),
            t.fpi,
            t.fpi_bytes
        );
    }
    println!(
        "{:-<18} {:->10} {:->8} {:->14} {:->8} {:->10} {:->14}",
        "", "", "", "", "", "", ""
    );
    let fpi: u64 = totals.values().map(|t| t.fpi).sum();
    let fpi_bytes: u64 = totals.values().map(|t| t.fpi_bytes).sum();
    println!(
        "{:<18} {:>10} {:>8} {:>14} {:>8} {:>10} {:>14}",
        "Total", all_count, "", all_bytes, "", fpi, fpi_bytes
    );
}
