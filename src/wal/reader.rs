//! The WAL reader: records in order, and a clean stop at the end of valid
//! WAL saying where and why.
//!
//! Rules:
//! - Only I/O errors are `Err`. Bytes that are not valid WAL end the WAL:
//!   [`WalReader::next`] returns `None` and [`WalReader::end`] names the
//!   position where valid WAL ends (the end of the last good record: where
//!   the writer continues) and an [`EndOfWal`] reason.
//! - A CRC-valid record that this version cannot understand (unknown kind,
//!   unknown flags, malformed payload) is an `Err` naming its LSN: it was
//!   written by someone, so stopping there silently would lose data.
//! - Every page is checked (magic, version, address, long header, epoch,
//!   continuation length) before a byte of it is used; every record's
//!   CRC, previous-record LSN and epoch are checked before it is returned.
//!   Page and record epochs must not decrease along the log: a lower one is
//!   stale, left over from a timeline that an earlier recovery cut off.
//! - Every flush ends on a sector boundary (a padding record fills the
//!   rest). Records are returned only once a record ending on such a
//!   boundary is read: those after the last one belong to a flush that did
//!   not complete (nobody was told they committed), and the WAL ends before
//!   them, on the boundary, where the writer continues without writing
//!   into a sector that holds durable WAL. Padding records are skipped.

use super::config::{validate_sizes, WalConfig};
use super::end::EndOfWal;
use super::format::{
    align_up, Geometry, PageHeader, RecordHeader, MAX_RECORD_LEN, PAGE_FLAGS_KNOWN,
    PAGE_FLAG_CONTINUATION, PAGE_FLAG_FIRST_IN_SEGMENT, PAGE_HEADER_VERSION, PAGE_MAGIC,
    RECORD_ALIGN, RECORD_HEADER_LEN, RECORD_KIND_PADDING,
};
use super::record::{RecordData, RecordKind};
use super::segment;
use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use crate::lsn::Lsn;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRecord {
    /// Where the record starts (its header).
    pub lsn: Lsn,
    /// Where the next record may start (after the alignment padding).
    pub end_lsn: Lsn,
    pub prev_lsn: Lsn,
    /// Header plus payload.
    pub total_len: u32,
    /// The epoch of the writer that inserted it.
    pub epoch: u32,
    pub data: RecordData,
}

/// The oldest segment's start: where a dump of everything begins. `None`
/// when the directory holds no segment.
pub fn first_segment_start(
    fs: &dyn FileSystem,
    dir: &Path,
    cfg: &WalConfig,
) -> Result<Option<Lsn>> {
    let segs = segment::list_segments(fs, dir)?;
    Ok(segs.first().map(|s| Lsn(s * cfg.segment_size)))
}

/// What a page entered must continue.
#[derive(Clone, Copy)]
enum Expect {
    /// A record continues onto it with this many bytes left.
    Continuation(u32),
    /// A record starts on it: no continuation.
    RecordStart,
    /// The first page read: anything.
    Any,
}

enum Stop {
    End(EndOfWal),
    Fail(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Fail(e)
    }
}

impl From<EndOfWal> for Stop {
    fn from(e: EndOfWal) -> Stop {
        Stop::End(e)
    }
}

struct Page {
    start: u64,
    bytes: Vec<u8>,
    /// The offset in the page of its first unreadable sector (unreadable
    /// sectors read as zeros), and the error.
    unreadable: Option<(u64, String)>,
}

/// The granule an unreadable page is read again in: the smallest sector.
const SALVAGE_UNIT: usize = 512;

/// Reads records in LSN order from a start position.
pub struct WalReader {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    cfg: WalConfig,
    geo: Geometry,
    who: Issuer,
    /// Where the next record's search begins: the end of the last record.
    pos: u64,
    /// No record returned yet.
    first: bool,
    expected_prev: Option<u64>,
    epoch_floor: u32,
    /// The epoch of the first continuation page of the record being read.
    first_cont_epoch: Option<u32>,
    seg: Option<(u64, Arc<dyn File>)>,
    page: Option<Page>,
    end: Option<(Lsn, EndOfWal)>,
    /// Records read past the last flush boundary, returned once a record
    /// ends on the next one, dropped if the WAL ends first.
    held: Vec<ReadRecord>,
    /// Records up to the last flush boundary, not yet returned.
    ready: VecDeque<ReadRecord>,
    /// The last flush boundary (the start before any) and the record
    /// ending there (padding included), as `expected_prev` holds it.
    boundary: u64,
    boundary_prev: Option<u64>,
    returned_end: u64,
    /// Every valid record, an incomplete flush's too (a tool's view).
    every_record: bool,
}

impl WalReader {
    /// A reader from `start`: a record's start, the end of a record, a page
    /// boundary (a continued record there is skipped), or 0. The reader
    /// uses the sizes and system id of `cfg`, not its epoch.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        cfg: &WalConfig,
        start: Lsn,
    ) -> Result<WalReader> {
        validate_sizes(cfg.block_size, cfg.segment_size)?;
        let geo = Geometry::new(cfg);
        let off = geo.page_offset(start.0);
        if !start.0.is_multiple_of(RECORD_ALIGN)
            || (off != 0 && off < geo.header_len(geo.page_start(start.0)))
        {
            return Err(Error::Invalid(format!(
                "WAL read start {start} is not a record boundary"
            )));
        }
        // The very first record of the WAL has no predecessor.
        let expected_prev = (start.0 <= geo.header_len(0)).then_some(0);
        Ok(WalReader {
            fs,
            dir: dir.to_path_buf(),
            cfg: *cfg,
            geo,
            who: Issuer::Recovery,
            pos: start.0,
            first: true,
            expected_prev,
            epoch_floor: 0,
            first_cont_epoch: None,
            seg: None,
            page: None,
            end: None,
            held: Vec::new(),
            ready: VecDeque::new(),
            boundary: start.0,
            boundary_prev: expected_prev,
            returned_end: start.0,
            every_record: false,
        })
    }

    /// Tags the reads with `who` (default [`Issuer::Recovery`]).
    pub fn with_issuer(mut self, who: Issuer) -> WalReader {
        self.who = who;
        self
    }

    /// Returns the records of a flush that did not complete as well (not
    /// for recovery: the writer writes over them); the end is then the end
    /// of the last record returned.
    pub fn every_record(mut self) -> WalReader {
        self.every_record = true;
        self
    }

    /// Checks the first record's previous-record LSN against `prev`.
    pub fn expect_prev(mut self, prev: Lsn) -> WalReader {
        self.expected_prev = Some(prev.0);
        self.boundary_prev = Some(prev.0);
        self
    }

    /// The end of the last record returned (the start before any).
    pub fn position(&self) -> Lsn {
        Lsn(self.returned_end)
    }

    /// The LSN of the record before the end of WAL, once `next` returned
    /// `None` (a padding record's, if one ends the WAL; the expected
    /// predecessor of the first when none was read; `Lsn::INVALID` when
    /// unknown): the `prev_record` to give [`super::Wal::open`].
    pub fn prev_record(&self) -> Lsn {
        Lsn(self.boundary_prev.unwrap_or(0))
    }

    /// Where valid WAL ends and why, once `next` returned `None`.
    pub fn end(&self) -> Option<(Lsn, EndOfWal)> {
        self.end.clone()
    }

    /// The next record, or `None` at the end of valid WAL.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<ReadRecord>> {
        loop {
            if let Some(rec) = self.ready.pop_front() {
                self.returned_end = rec.end_lsn.0;
                return Ok(Some(rec));
            }
            if self.end.is_some() {
                return Ok(None);
            }
            self.read_to_boundary()?;
        }
    }

    /// Reads one record; moves the records held to `ready` when it ends a
    /// flush, or ends the WAL at the last boundary.
    fn read_to_boundary(&mut self) -> Result<()> {
        match self.read_record() {
            Ok(rec) if self.every_record => {
                if let Some(rec) = rec {
                    self.boundary = self.pos;
                    self.boundary_prev = self.expected_prev;
                    self.ready.push_back(rec);
                }
                Ok(())
            }
            Ok(rec) => {
                self.held.extend(rec);
                if let Some(next) = self.geo.flush_boundary(self.pos) {
                    self.ready.extend(self.held.drain(..));
                    self.boundary = next;
                    self.boundary_prev = self.expected_prev;
                }
                Ok(())
            }
            Err(Stop::End(why)) => {
                // Valid WAL ending on a page with unreadable sectors ends
                // because of them (the page was being written at a crash).
                let why = match self.page.as_ref().and_then(|pg| {
                    let (at, error) = pg.unreadable.as_ref()?;
                    Some((pg.start, *at, error))
                }) {
                    Some((page, at, error)) if !matches!(why, EndOfWal::Unreadable { .. }) => {
                        EndOfWal::Unreadable {
                            page: Lsn(page),
                            error: format!("{error} at byte {at} of the page ({why})"),
                        }
                    }
                    _ => why,
                };
                // An incomplete flush's records: never acknowledged, and
                // the writer will write over them.
                self.held.clear();
                self.end = Some((Lsn(self.boundary), why));
                Ok(())
            }
            Err(Stop::Fail(e)) => Err(e),
        }
    }

    /// Every record up to the end of valid WAL.
    pub fn read_to_end(&mut self) -> Result<Vec<ReadRecord>> {
        let mut out = Vec::new();
        while let Some(r) = self.next()? {
            out.push(r);
        }
        Ok(out)
    }

    /// The next record (`None`: a padding record, skipped).
    fn read_record(&mut self) -> std::result::Result<Option<ReadRecord>, Stop> {
        let geo = self.geo;
        let mut p = self.pos;
        if geo.page_offset(p) == 0 {
            let expect = if self.first {
                Expect::Any
            } else {
                Expect::RecordStart
            };
            let h = self.enter_page(p, expect)?;
            p += h.header_len() as u64;
            if h.cont_remaining > 0 {
                // Only on the first page read: a record begun before it.
                p = self.skip_continuation(p, h.cont_remaining)?;
            }
        } else if self.page.as_ref().map(|pg| pg.start) != Some(geo.page_start(p)) {
            self.enter_page(geo.page_start(p), Expect::Any)?;
        }
        let off = geo.page_offset(p);
        if off != 0 && geo.block - off < RECORD_HEADER_LEN as u64 {
            p = geo.page_start(p) + geo.block;
        }
        if geo.page_offset(p) == 0 {
            let h = self.enter_page(p, Expect::RecordStart)?;
            p += h.header_len() as u64;
        }
        self.read_record_at(p)
    }

    /// Reads the record starting at `p` on the loaded page (`None`: a
    /// padding record).
    fn read_record_at(&mut self, start: u64) -> std::result::Result<Option<ReadRecord>, Stop> {
        let floor = self.epoch_floor;
        let off = self.geo.page_offset(start) as usize;
        let page = self.page.as_ref().expect("record start page is loaded");
        let h = RecordHeader::decode(&page.bytes[off..off + RECORD_HEADER_LEN])
            .expect("a page holds a whole record header");
        if h.total_len == 0 {
            return Err(EndOfWal::ZeroLength.into());
        }
        if h.total_len < RECORD_HEADER_LEN as u32 {
            return Err(EndOfWal::RecordTooShort { len: h.total_len }.into());
        }
        if h.total_len > MAX_RECORD_LEN {
            return Err(EndOfWal::RecordTooLong { len: h.total_len }.into());
        }
        let len = h.total_len as usize - RECORD_HEADER_LEN;
        let mut payload = Vec::with_capacity(len);
        self.first_cont_epoch = None;
        let after = self.read_span(start + RECORD_HEADER_LEN as u64, len, Some(&mut payload))?;
        let calculated = h.compute_crc(&payload);
        if calculated != h.crc {
            return Err(EndOfWal::BadCrc {
                stored: h.crc,
                calculated,
            }
            .into());
        }
        if let Some(expected) = self.expected_prev.filter(|e| *e != h.prev_lsn) {
            return Err(EndOfWal::BadPrevLsn {
                expected: Lsn(expected),
                found: Lsn(h.prev_lsn),
            }
            .into());
        }
        if h.epoch < floor {
            return Err(EndOfWal::StaleEpoch {
                at: Lsn(start),
                previous: floor,
                found: h.epoch,
            }
            .into());
        }
        if let Some(cont) = self.first_cont_epoch.filter(|c| *c < h.epoch) {
            return Err(EndOfWal::StaleEpoch {
                at: Lsn(self.geo.page_start(start) + self.geo.block),
                previous: h.epoch,
                found: cont,
            }
            .into());
        }
        let data = if h.kind == RECORD_KIND_PADDING {
            self.check_padding(&h, start)?;
            None
        } else {
            Some(self.decode(&h, start, &payload)?)
        };
        let end = align_up(after);
        self.pos = end;
        self.first = false;
        self.expected_prev = Some(start);
        self.epoch_floor = self.epoch_floor.max(h.epoch);
        Ok(data.map(|data| ReadRecord {
            lsn: Lsn(start),
            end_lsn: Lsn(end),
            prev_lsn: Lsn(h.prev_lsn),
            total_len: h.total_len,
            epoch: h.epoch,
            data,
        }))
    }

    /// A CRC-valid padding record must end on a sector boundary (or, where
    /// a sector spans pages, at its page's end) and carry no transaction or
    /// flags: otherwise this version did not write it.
    fn check_padding(&self, h: &RecordHeader, start: u64) -> Result<()> {
        let end = align_up(start + h.total_len as u64);
        let geo = &self.geo;
        let ends_sector = geo.flush_boundary(end).is_some()
            || (geo.sector > geo.block && geo.page_offset(geo.next_record_pos(end)) == 0);
        if h.xid == 0 && h.flags == 0 && h.reserved == 0 && ends_sector {
            return Ok(());
        }
        Err(Error::corruption(
            segment::segment_path(&self.dir, self.geo.segment_of(start)),
            format!("LSN {}", Lsn(start)),
            format!(
                "CRC-valid padding record of {} bytes with xid {}, flags {:#04x}, reserved {:#06x} that does not end a sector",
                h.total_len, h.xid, h.flags, h.reserved
            ),
        ))
    }

    /// The record's contents; a CRC-valid record this version cannot
    /// understand is an error, not an end.
    fn decode(&self, h: &RecordHeader, start: u64, payload: &[u8]) -> Result<RecordData> {
        let path = segment::segment_path(&self.dir, self.geo.segment_of(start));
        let at = format!("LSN {}", Lsn(start));
        let Some(kind) = RecordKind::from_u8(h.kind) else {
            return Err(Error::corruption(
                &path,
                at,
                format!("CRC-valid record of unknown kind {}", h.kind),
            ));
        };
        if h.flags != 0 || h.reserved != 0 {
            return Err(Error::corruption(
                &path,
                at,
                format!(
                    "CRC-valid record with unknown flags {:#04x} / reserved {:#06x}",
                    h.flags, h.reserved
                ),
            ));
        }
        RecordData::decode(kind, h.xid, payload, &path, Lsn(start))
    }

    /// Follows `len` bytes of a record from `p` across pages (each entered
    /// page must continue the record with exactly what is left), appending
    /// them to `out` if given. Returns the position after them.
    fn read_span(
        &mut self,
        mut p: u64,
        len: usize,
        mut out: Option<&mut Vec<u8>>,
    ) -> std::result::Result<u64, Stop> {
        let bs = self.geo.block;
        let mut left = len;
        while left > 0 {
            if self.geo.page_offset(p) == 0 {
                let h = self.enter_page(p, Expect::Continuation(left as u32))?;
                p += h.header_len() as u64;
            }
            let off = self.geo.page_offset(p) as usize;
            let n = (bs as usize - off).min(left);
            if let (Some(o), Some(pg)) = (out.as_mut(), self.page.as_ref()) {
                o.extend_from_slice(&pg.bytes[off..off + n]);
            }
            p += n as u64;
            left -= n;
        }
        Ok(p)
    }

    /// Skips the rest of a record continued onto the first page read.
    fn skip_continuation(&mut self, p: u64, remaining: u32) -> std::result::Result<u64, Stop> {
        let page = self.geo.page_start(p);
        if remaining > MAX_RECORD_LEN {
            return Err(EndOfWal::BadContinuation {
                page: Lsn(page),
                expected: MAX_RECORD_LEN,
                found: remaining,
            }
            .into());
        }
        // The bytes on this page count; later pages must continue them.
        let on_page = (self.geo.block - self.geo.page_offset(p)).min(remaining as u64);
        let mut q = p + on_page;
        let rest = remaining as u64 - on_page;
        if rest > 0 {
            q = self.read_span(q, rest as usize, None)?;
        }
        Ok(align_up(q))
    }

    /// Loads and checks the page starting at `p`; returns its header.
    fn enter_page(&mut self, p: u64, expect: Expect) -> std::result::Result<PageHeader, Stop> {
        let geo = self.geo;
        let segno = geo.segment_of(p);
        let file = self.segment(segno)?;
        let mut bytes = self
            .page
            .take()
            .map(|pg| pg.bytes)
            .unwrap_or_else(|| vec![0u8; geo.block as usize]);
        // A sector a write was cut off in at a power loss may fail reads.
        // The page is read around it, not given up whole: the records
        // before it may be acknowledged commits, and the first record that
        // needed its bytes ends the WAL by its CRC. (Damage before the last
        // checkpoint record is caught by the caller, which knows where that
        // record lies.)
        let (n, unreadable) =
            read_around_unreadable(file.as_ref(), &mut bytes, geo.segment_offset(p), self.who)?;
        if let Some((at, error)) = &unreadable {
            if *at < geo.header_len(p) {
                return Err(EndOfWal::Unreadable {
                    page: Lsn(p),
                    error: error.clone(),
                }
                .into());
            }
        }
        if n < bytes.len() {
            let len = file.len()?;
            return Err(EndOfWal::ShortSegment {
                segment: segno,
                len,
            }
            .into());
        }
        let h = PageHeader::decode(&bytes).expect("a block holds a long header");
        self.check_page(p, &h, expect)?;
        self.epoch_floor = self.epoch_floor.max(h.epoch);
        if matches!(expect, Expect::Continuation(_)) && self.first_cont_epoch.is_none() {
            self.first_cont_epoch = Some(h.epoch);
        }
        self.page = Some(Page {
            start: p,
            bytes,
            unreadable,
        });
        Ok(h)
    }

    fn check_page(&self, p: u64, h: &PageHeader, expect: Expect) -> std::result::Result<(), Stop> {
        let page = Lsn(p);
        let bad = |detail: String| Stop::End(EndOfWal::BadPageHeader { page, detail });
        if h.magic != PAGE_MAGIC {
            return Err(EndOfWal::BadPageMagic {
                page,
                found: h.magic,
            }
            .into());
        }
        if h.version != PAGE_HEADER_VERSION {
            if h.address == p {
                // Written here by another version of the format: reading
                // it by this version's rules could drop commits.
                return Err(Stop::Fail(Error::corruption(
                    segment::segment_path(&self.dir, self.geo.segment_of(p)),
                    format!("LSN {page}"),
                    format!(
                        "WAL page header version {}; this build reads version {PAGE_HEADER_VERSION} only",
                        h.version
                    ),
                )));
            }
            return Err(bad(format!("unknown header version {}", h.version)));
        }
        if h.address != p {
            return Err(EndOfWal::WrongPageAddress {
                expected: page,
                found: Lsn(h.address),
            }
            .into());
        }
        if h.flags & !PAGE_FLAGS_KNOWN != 0 {
            return Err(bad(format!("unknown flags {:#06x}", h.flags)));
        }
        let first_in_segment = self.geo.segment_offset(p) == 0;
        if first_in_segment != (h.flags & PAGE_FLAG_FIRST_IN_SEGMENT != 0) {
            return Err(bad(format!(
                "long-header flag {} on a page that is {}the first of its segment",
                if first_in_segment { "missing" } else { "set" },
                if first_in_segment { "" } else { "not " }
            )));
        }
        if let Some(l) = &h.long {
            let c = &self.cfg;
            let detail = if l.system_id != c.system_id {
                Some(format!(
                    "system id {} instead of {}",
                    l.system_id, c.system_id
                ))
            } else if l.segment_size != c.segment_size {
                Some(format!(
                    "segment size {} instead of {}",
                    l.segment_size, c.segment_size
                ))
            } else if l.block_size != c.block_size {
                Some(format!(
                    "block size {} instead of {}",
                    l.block_size, c.block_size
                ))
            } else {
                None
            };
            if let Some(detail) = detail {
                let segment = self.geo.segment_of(p);
                return Err(EndOfWal::ForeignSegment { segment, detail }.into());
            }
        }
        if h.epoch < self.epoch_floor {
            return Err(EndOfWal::StaleEpoch {
                at: page,
                previous: self.epoch_floor,
                found: h.epoch,
            }
            .into());
        }
        let has_cont = h.flags & PAGE_FLAG_CONTINUATION != 0;
        if has_cont != (h.cont_remaining > 0) {
            return Err(bad(format!(
                "continuation flag {} but {} bytes continued",
                if has_cont { "set" } else { "clear" },
                h.cont_remaining
            )));
        }
        let expected = match expect {
            Expect::Continuation(r) => r,
            Expect::RecordStart => 0,
            Expect::Any => h.cont_remaining,
        };
        if h.cont_remaining != expected {
            return Err(EndOfWal::BadContinuation {
                page,
                expected,
                found: h.cont_remaining,
            }
            .into());
        }
        Ok(())
    }

    /// The open segment file, or the end of WAL if it does not exist.
    fn segment(&mut self, segno: u64) -> std::result::Result<Arc<dyn File>, Stop> {
        if let Some((n, f)) = &self.seg {
            if *n == segno {
                return Ok(f.clone());
            }
        }
        let path = segment::segment_path(&self.dir, segno);
        if !self.fs.exists(&path) {
            return Err(EndOfWal::MissingSegment { segment: segno }.into());
        }
        let f = self
            .fs
            .open(&path, FileKind::Wal, OpenOptions::read_only())?;
        self.seg = Some((segno, f.clone()));
        Ok(f)
    }
}

/// Reads `buf` at `offset`. Where that fails with EIO, reads it again a
/// sector at a time, and a sector that fails reads as zeros: a guess the
/// record CRCs check (a record that had other bytes there fails its CRC and
/// ends the WAL; one whose bytes there were zeros, padding or a zero run in
/// a payload, is intact). Returns the bytes read and, if a sector failed,
/// the offset in `buf` of the first one and the error.
pub(crate) fn read_around_unreadable(
    file: &dyn File,
    buf: &mut [u8],
    offset: u64,
    who: Issuer,
) -> Result<(usize, Option<(u64, String)>)> {
    let is_eio = |e: &Error| matches!(e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EIO));
    match file.read_at(buf, offset, who) {
        Err(e) if is_eio(&e) => {}
        res => return res.map(|n| (n, None)),
    }
    let mut first: Option<(u64, String)> = None;
    let mut at = 0;
    while at < buf.len() {
        let end = (at + SALVAGE_UNIT).min(buf.len());
        match file.read_at(&mut buf[at..end], offset + at as u64, who) {
            Ok(n) if at + n < end => {
                // The file ends here.
                buf[at + n..].fill(0);
                return Ok((at + n, first));
            }
            Ok(_) => {}
            Err(e) if is_eio(&e) => {
                buf[at..end].fill(0);
                first.get_or_insert((at as u64, e.to_string()));
            }
            Err(e) => return Err(e),
        }
        at = end;
    }
    Ok((buf.len(), first))
}
