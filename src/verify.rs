//! Checking every page of every data file, like `pg_checksums --check`.
//!
//! The database should be shut down (or crashed, before recovery runs, to
//! see what the crash left): pages being written while the check reads them
//! may show as torn.

use crate::control::ControlFile;
use crate::db::directory::DATA_DIR;
use crate::error::{Error, Result};
use crate::file::segmented::parse_segment_name;
use crate::file::{FileKind, FileSystem, Issuer, OpenOptions};
use crate::page::{verify_page, PageError, PageState};
use std::path::{Path, PathBuf};

/// One page that failed its check.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PageFailure {
    /// The segment file.
    pub path: PathBuf,
    pub file_id: u32,
    /// The file-wide block number.
    pub block: u32,
    /// For checksum failures: calculated and stored values.
    pub calculated: Option<u32>,
    pub stored: Option<u32>,
    pub detail: String,
}

impl std::fmt::Display for PageFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: block {}: {}",
            self.path.display(),
            self.block,
            self.detail
        )
    }
}

/// The outcome of a check of every data page.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct VerifyReport {
    pub files_scanned: u64,
    pub pages_scanned: u64,
    pub pages_new: u64,
    pub failures: Vec<PageFailure>,
    /// Files in the data directory that are not data segments.
    pub skipped_files: Vec<PathBuf>,
    /// Files whose length is not a whole number of pages (their last,
    /// partial block is also among the failures).
    pub partial_pages: Vec<PathBuf>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.failures.is_empty() && self.partial_pages.is_empty()
    }
}

/// Checks every page of every data file of the database in `dir`.
pub fn verify_database(fs: &dyn FileSystem, dir: &Path) -> Result<VerifyReport> {
    let control = ControlFile::read(fs, dir, Issuer::Tool)?;
    let settings = &control.settings;
    let page_size = settings.page_size as usize;
    let pages_per_segment = settings.pages_per_data_segment();
    let data_dir = dir.join(DATA_DIR);
    let mut report = VerifyReport::default();
    if !fs.exists(&data_dir) {
        return Ok(report);
    }
    let mut buf = vec![0u8; page_size];
    for path in fs.list_dir(&data_dir)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some((file_id, segment)) = parse_segment_name(name) else {
            report.skipped_files.push(path);
            continue;
        };
        let file = fs.open(&path, FileKind::Data, OpenOptions::read_only())?;
        let len = file.len()?;
        report.files_scanned += 1;
        for index in 0..len / page_size as u64 {
            let block64 = segment * pages_per_segment + index;
            let block = u32::try_from(block64).map_err(|_| {
                Error::corruption(
                    &path,
                    format!("block {block64}"),
                    "block number beyond 2^32",
                )
            })?;
            file.read_exact_at(&mut buf, index * page_size as u64, Issuer::Tool)?;
            report.pages_scanned += 1;
            match verify_page(&buf, settings.data_checksums, file_id, block) {
                Ok(PageState::New) => report.pages_new += 1,
                Ok(PageState::Valid) => {}
                Err(err) => report.failures.push(failure(&path, file_id, block, err)),
            }
        }
        if len % page_size as u64 != 0 {
            // A write that extended the file was cut short by a crash.
            // Recovery restores such a page from the WAL and rewrites it
            // whole; one still here is damage (or recovery has not run).
            let index = len / page_size as u64;
            report.partial_pages.push(path.clone());
            report.failures.push(PageFailure {
                path: path.clone(),
                file_id,
                block: u32::try_from(segment * pages_per_segment + index).unwrap_or(u32::MAX),
                calculated: None,
                stored: None,
                detail: format!(
                    "partial page at the end of the file ({} of {page_size} bytes)",
                    len % page_size as u64
                ),
            });
        }
    }
    Ok(report)
}

fn failure(path: &Path, file_id: u32, block: u32, err: PageError) -> PageFailure {
    let (calculated, stored) = match err {
        PageError::Checksum { calculated, stored } => (Some(calculated), Some(stored)),
        _ => (None, None),
    };
    PageFailure {
        path: path.to_path_buf(),
        file_id,
        block,
        calculated,
        stored,
        detail: err.to_string(),
    }
}
