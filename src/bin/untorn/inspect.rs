//! `untorn inspect`: the control file, like pg_controldata.

use std::path::Path;
use std::process::ExitCode;
use untorn::control::ControlFile;
use untorn::db::directory::lock_for_reading;
use untorn::file::{FileSystem, Issuer};

pub fn run(fs: &dyn FileSystem, dir: &Path, json: bool) -> untorn::Result<ExitCode> {
    // Held while it reads: refused while an opening holds the directory.
    let _lock = lock_for_reading(fs, dir)?;
    let c = ControlFile::read(fs, dir, Issuer::Tool)?;
    if json {
        let text =
            serde_json::to_string_pretty(&c).map_err(|e| untorn::Error::Invalid(e.to_string()))?;
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let s = &c.settings;
    let rows: Vec<(&str, String)> = vec![
        ("Control file format version", c.format_version.to_string()),
        ("Database system identifier", c.system_id.to_string()),
        ("Database state", c.state.describe().to_string()),
        (
            "Control file last modified (unix time)",
            c.update_time.to_string(),
        ),
        ("Latest checkpoint location", c.checkpoint_lsn.to_string()),
        ("Latest checkpoint's REDO location", c.redo_lsn.to_string()),
        ("Latest checkpoint's NextXID", c.next_xid.to_string()),
        ("Latest checkpoint's NextFileId", c.next_file_id.to_string()),
        (
            "Time of latest checkpoint (unix time)",
            c.checkpoint_time.to_string(),
        ),
        ("WAL epoch", c.wal_epoch.to_string()),
        ("Database page size", s.page_size.to_string()),
        ("WAL block size", s.wal_block_size.to_string()),
        ("Device sector size", s.sector_size.to_string()),
        ("Bytes per WAL segment", s.wal_segment_size.to_string()),
        ("Bytes per data segment", s.data_segment_size.to_string()),
        ("Data page checksums", s.data_checksums.to_string()),
        ("Torn-page protection", s.torn_page_protection.to_string()),
    ];
    for (k, v) in rows {
        println!("{:<42}{v}", format!("{k}:"));
    }
    Ok(ExitCode::SUCCESS)
}
