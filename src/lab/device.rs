//! A device model: a file layer that adds modelled latency to another one's
//! writes and fsyncs, so that the seeds' hardware-dependent results can be
//! approached on machines whose fsync is nearly free.
//!
//! The model (docs/SETTINGS.md, "Device models", lists each profile's
//! parameters): a write costs a seek when it does not continue the previous
//! write to the same file, plus its bytes at the device's bandwidth; an fsync
//! costs a fixed flush plus the bytes written to that file since its last
//! fsync at the bandwidth (a write cache makes writes cheap and moves the
//! cost to the fsync); a battery-backed cache absorbs fsyncs. A device with
//! one head (`serial`) serves one request at a time, first come first
//! served, with no idle time between queued requests; a write longer than a
//! request ([`MAX_REQUEST_BYTES`]) is served as several, and other callers'
//! requests go between them, as the block layer splits a long write and the
//! I/O scheduler interleaves other requests with its parts. Latency is
//! spent by sleeping in the calling thread, on a serial device until its
//! request's modelled end, after the requests queued ahead of it. Reads
//! are not slowed: the buffer pool and the OS cache serve them in these
//! benchmarks.

use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest request a write is served in: Linux's block layer splits a
/// write at the queue's `max_sectors_kb`, 512 KB on most disks. Without the
/// split, one 32 MB checkpoint batch would hold a modelled head for 213 ms
/// (at 150 MB/s) while every commit's WAL write waited behind it.
pub const MAX_REQUEST_BYTES: u64 = 512 * 1024;

/// A device profile.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceProfile {
    pub name: &'static str,
    /// Cost of a write that does not continue the previous one (µs).
    pub seek_us: f64,
    /// Sequential bandwidth (MB/s) for writes and for flushing at fsync.
    pub bandwidth_mb_s: f64,
    /// Fixed cost of an fsync (µs).
    pub fsync_us: f64,
    /// With a write cache, writes cost only the transfer; the flush cost
    /// moves to fsync (the bytes written since the last fsync).
    pub write_cache: bool,
    /// A battery-backed cache: fsync returns at once, writes cost the transfer.
    pub battery_backed: bool,
    /// One call at a time (a disk head), or parallel (flash).
    pub serial: bool,
    /// The largest write the device makes all or nothing in hardware
    /// (statx's `unit_max_opt`; 0: none). Such a device reports it to the
    /// engine, so `torn_page_protection = atomic` (and `auto`) run on it,
    /// and costs an atomic write as a plain one, as NVMe's atomic write
    /// unit (AWUPF) does: the model shows what the mode saves.
    pub atomic_unit: u32,
}

impl DeviceProfile {
    /// The profiles `--device` accepts, with their parameters.
    pub fn all() -> Vec<DeviceProfile> {
        let p = |name, seek_us, bandwidth_mb_s, fsync_us, write_cache, battery_backed, serial| {
            DeviceProfile {
                name,
                seek_us,
                bandwidth_mb_s,
                fsync_us,
                write_cache,
                battery_backed,
                serial,
                atomic_unit: 0,
            }
        };
        vec![
            // 7,200 rpm disk, write cache off: every write seeks and lands.
            p("hdd", 8000.0, 150.0, 4200.0, false, false, true),
            // The same disk behind a battery-backed controller cache.
            p("hdd-bbwc", 100.0, 150.0, 0.0, true, true, true),
            // SATA SSD without power-loss protection: a flush costs ~1 ms.
            p("sata-ssd", 60.0, 450.0, 1000.0, true, false, false),
            // NVMe SSD without power-loss protection.
            p("nvme", 15.0, 2000.0, 300.0, true, false, false),
            // The same NVMe writing 16 KB all or nothing (as AWS's and
            // Azure's torn-write prevention, and drives with a 16 KB
            // AWUPF, do).
            DeviceProfile {
                atomic_unit: 16384,
                ..p("nvme-atomic", 15.0, 2000.0, 300.0, true, false, false)
            },
        ]
    }

    /// The profile named `name`; `real` means none (`Ok(None)`).
    pub fn by_name(name: &str) -> Result<Option<DeviceProfile>> {
        if name == "real" {
            return Ok(None);
        }
        Self::all()
            .into_iter()
            .find(|p| p.name == name)
            .map(Some)
            .ok_or_else(|| Error::InvalidSetting {
                name: "device",
                detail: format!(
                    "{name:?} is not one of real, {}",
                    Self::all()
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    fn transfer_us(&self, bytes: u64) -> f64 {
        bytes as f64 / self.bandwidth_mb_s
    }
}

/// Per-device state: where the head is, what each file has unflushed.
#[derive(Default)]
struct DeviceState {
    last_write_end: HashMap<PathBuf, u64>,
    unflushed: HashMap<PathBuf, u64>,
}

/// A file layer that adds a device's latency to another one.
pub struct DeviceFileSystem {
    inner: Arc<dyn FileSystem>,
    profile: DeviceProfile,
    state: Arc<Mutex<DeviceState>>,
    head: Arc<Head>,
    spent_us: Arc<AtomicU64>,
}

impl DeviceFileSystem {
    pub fn new(inner: Arc<dyn FileSystem>, profile: DeviceProfile) -> DeviceFileSystem {
        DeviceFileSystem {
            inner,
            profile,
            state: Arc::default(),
            head: Arc::new(Head::new()),
            spent_us: Arc::default(),
        }
    }

    /// Modelled latency added so far, in microseconds.
    pub fn modelled_us(&self) -> u64 {
        self.spent_us.load(Relaxed)
    }
}

struct DeviceFile {
    inner: Arc<dyn File>,
    profile: DeviceProfile,
    state: Arc<Mutex<DeviceState>>,
    head: Arc<Head>,
    spent_us: Arc<AtomicU64>,
}

/// A serial device's queue: when the modelled head finishes the requests
/// taken so far. A request starts when the head is free or when it
/// arrives, whichever is later, so the head never idles while requests
/// wait (a lock handed from thread to thread would idle it for each
/// wake-up).
struct Head {
    free_at: Mutex<Instant>,
}

impl Head {
    fn new() -> Head {
        Head {
            free_at: Mutex::new(Instant::now()),
        }
    }

    /// Occupies the head for `busy` after the requests ahead, then sleeps
    /// until this request is done.
    fn serve(&self, busy: Duration) {
        let done = {
            let mut free_at = self.free_at.lock();
            *free_at = (*free_at).max(Instant::now()) + busy;
            *free_at
        };
        std::thread::sleep(done.saturating_duration_since(Instant::now()));
    }
}

/// Spends `us` of modelled time: on the head's queue for a serial device,
/// else in parallel with every other caller.
fn spend_on(profile: &DeviceProfile, head: &Head, us: f64) {
    let busy = Duration::from_nanos((us * 1000.0) as u64);
    if profile.serial {
        head.serve(busy);
    } else {
        std::thread::sleep(busy);
    }
}

impl DeviceFile {
    fn spend(&self, us: f64) {
        if us <= 0.0 {
            return;
        }
        self.spent_us.fetch_add(us as u64, Relaxed);
        spend_on(&self.profile, &self.head, us);
    }

    fn model_write(&self, offset: u64, len: u64) {
        let path = self.inner.path().to_path_buf();
        let sequential = {
            let mut st = self.state.lock();
            let seq = st.last_write_end.get(&path) == Some(&offset);
            st.last_write_end.insert(path.clone(), offset + len);
            *st.unflushed.entry(path).or_default() += len;
            seq
        };
        let p = &self.profile;
        let mut seek = if sequential || p.write_cache {
            0.0
        } else {
            p.seek_us
        };
        let mut left = len;
        loop {
            let request = left.min(MAX_REQUEST_BYTES);
            self.spend(seek + p.transfer_us(request));
            left -= request;
            if left == 0 {
                return;
            }
            // The request continues the previous one.
            seek = 0.0;
        }
    }

    fn model_fsync(&self) {
        let unflushed = self
            .state
            .lock()
            .unflushed
            .remove(self.inner.path())
            .unwrap_or(0);
        let p = &self.profile;
        if p.battery_backed {
            return;
        }
        let flush = if p.write_cache {
            p.transfer_us(unflushed) + p.seek_us
        } else {
            0.0
        };
        self.spend(p.fsync_us + flush);
    }
}

impl File for DeviceFile {
    crate::forward_file_methods!(inner: path, kind, read_at, writeback_hint, write_back_and_wait, allocate, set_len, len, try_lock, unlock);

    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        self.model_write(offset, buf.len() as u64);
        self.inner.write_at(buf, offset, who)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        self.model_write(offset, bufs.iter().map(|b| b.len() as u64).sum());
        self.inner.write_vectored_at(bufs, offset, who)
    }
    fn sync_all(&self, who: Issuer) -> Result<()> {
        self.model_fsync();
        self.inner.sync_all(who)
    }
    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.model_fsync();
        self.inner.sync_data(who)
    }
}

impl FileSystem for DeviceFileSystem {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        // A modelled atomic device makes the writes whole itself: the
        // file underneath is a plain one.
        let opts = if self.profile.atomic_unit > 0 {
            OpenOptions {
                atomic_unit: None,
                ..opts
            }
        } else {
            opts
        };
        Ok(Arc::new(DeviceFile {
            inner: self.inner.open(path, kind, opts)?,
            profile: self.profile.clone(),
            state: self.state.clone(),
            head: self.head.clone(),
            spent_us: self.spent_us.clone(),
        }))
    }
    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()> {
        if !self.profile.battery_backed {
            spend_on(&self.profile, &self.head, self.profile.fsync_us);
        }
        self.inner.sync_dir(dir, who)
    }
    fn atomic_writes(&self, path: &Path) -> Result<crate::file::atomic::AtomicWrites> {
        let unit = self.profile.atomic_unit;
        let real = self.inner.atomic_writes(path)?;
        if unit == 0 {
            return Ok(real);
        }
        // What an NVMe with this atomic unit reports through statx.
        Ok(crate::file::atomic::AtomicWrites {
            reported: true,
            unit_min: 512,
            unit_max: unit,
            segments_max: 1,
            unit_max_opt: unit,
            ..real
        })
    }
    crate::forward_file_system_methods!(inner: rename, remove, create_dir_all, exists, list_dir, sector_size, free_space);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::posix::PosixFileSystem;

    /// A one-head test disk with a write cache and no seeks.
    fn test_disk(bandwidth_mb_s: f64, fsync_us: f64, battery_backed: bool) -> DeviceProfile {
        DeviceProfile {
            name: "test",
            seek_us: 0.0,
            bandwidth_mb_s,
            fsync_us,
            write_cache: true,
            battery_backed,
            serial: true,
            atomic_unit: 0,
        }
    }

    #[test]
    fn profiles_parse_and_unknown_names_are_refused() {
        assert!(DeviceProfile::by_name("real").unwrap().is_none());
        assert_eq!(DeviceProfile::by_name("hdd").unwrap().unwrap().name, "hdd");
        let e = DeviceProfile::by_name("floppy").unwrap_err().to_string();
        assert!(e.contains("floppy") && e.contains("nvme"), "{e}");
    }

    /// `nvme-atomic` says it writes 16 KB whole, so `auto` picks `atomic`
    /// on it (whatever the disk underneath offers), and its files take
    /// the mode's writes.
    #[test]
    fn a_modelled_atomic_device_takes_the_atomic_mode() {
        use crate::settings::TornPageProtection as P;
        let dir = tempfile::tempdir().unwrap();
        let nvme = DeviceProfile::by_name("nvme-atomic").unwrap().unwrap();
        let stats = Arc::new(crate::file::IoStats::default());
        let real = Arc::new(PosixFileSystem::new(stats.clone()));
        let fs: Arc<dyn FileSystem> = Arc::new(DeviceFileSystem::new(real, nvme));
        let a = fs.atomic_writes(dir.path()).unwrap();
        assert_eq!((a.unit_max, a.unit_max_opt), (16384, 16384));
        let mut o = crate::options::Options::default();
        o.creation.torn_page_protection = Some(P::Auto);
        let db = crate::db::Database::create_with(fs, stats, &dir.path().join("db"), o).unwrap();
        assert_eq!(db.settings().torn_page_protection, P::Atomic);
        let t = db.create_table("t").unwrap();
        let mut tx = db.begin();
        tx.upsert(&t, b"k", b"v").unwrap();
        tx.commit().unwrap();
        db.checkpoint().unwrap();
        db.close().unwrap();
        // The plain NVMe has none: auto takes double writes.
        let plain = DeviceProfile::by_name("nvme").unwrap().unwrap();
        let fs = DeviceFileSystem::new(Arc::new(PosixFileSystem::default()), plain);
        assert_eq!(fs.atomic_writes(dir.path()).unwrap().unit_max_opt, 0);
    }

    #[test]
    fn a_slow_fsync_costs_time_and_data_still_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let slow = test_disk(1000.0, 20_000.0, false);
        let fs = DeviceFileSystem::new(Arc::new(PosixFileSystem::default()), slow);
        let f = fs
            .open(&dir.path().join("a"), FileKind::Wal, OpenOptions::create())
            .unwrap();
        f.write_at(b"hello", 0, Issuer::WalWriter).unwrap();
        f.sync_data(Issuer::WalWriter).unwrap();
        assert!(fs.modelled_us() >= 20_000, "{}", fs.modelled_us());
        let mut buf = [0u8; 5];
        f.read_exact_at(&mut buf, 0, Issuer::Client).unwrap();
        assert_eq!(&buf, b"hello");
    }

    #[test]
    fn a_short_write_goes_between_the_requests_of_a_long_one() {
        let dir = tempfile::tempdir().unwrap();
        let disk = test_disk(10.0, 0.0, true);
        let fs = DeviceFileSystem::new(Arc::new(PosixFileSystem::default()), disk);
        let open = |name: &str| {
            fs.open(
                &dir.path().join(name),
                FileKind::Data,
                OpenOptions::create(),
            )
            .unwrap()
        };
        let (big, small) = (open("big"), open("small"));
        let long = vec![7u8; 4 * MAX_REQUEST_BYTES as usize];
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            s.spawn(|| {
                big.write_at(&long, 0, Issuer::Checkpointer).unwrap();
                order.lock().push("long");
            });
            // Once the long write's first request is queued, the short one
            // queues behind it, ahead of the long write's next.
            while fs.modelled_us() == 0 {
                std::thread::yield_now();
            }
            small.write_at(b"commit", 0, Issuer::WalWriter).unwrap();
            order.lock().push("short");
        });
        assert_eq!(*order.lock(), ["short", "long"]);
        // Split or not, the long write costs its bytes at the bandwidth.
        let whole = disk_us(long.len() as u64 + 6, 10.0);
        assert!(
            fs.modelled_us().abs_diff(whole) <= 8,
            "{}",
            fs.modelled_us()
        );
    }

    fn disk_us(bytes: u64, mb_s: f64) -> u64 {
        (bytes as f64 / mb_s) as u64
    }
}
