//! Errors are values that name what failed: the file, the page, the LSN.
//!
//! A panic is reserved for a broken invariant of our own code. Bytes read
//! from disk never panic: they produce [`Error::Corruption`] naming the file
//! and the position.

use std::path::PathBuf;

/// The result type used throughout untorn.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in untorn.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system call failed on a file.
    #[error("I/O error on {path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// An fsync (or fdatasync) failed. After PostgreSQL's 2018 "fsyncgate"
    /// we never retry: the kernel may already have dropped the dirty data
    /// and marked it clean, so a second fsync could "succeed" over lost
    /// writes. The process must stop and recover from the WAL.
    #[error("fatal: fsync failed on {path}: {source}; the database must be restarted and recovered from the WAL")]
    FsyncFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// pwritev2(RWF_ATOMIC) refused at run time (EOPNOTSUPP, EINVAL) under
    /// `torn_page_protection = atomic`: the device or file system no
    /// longer writes a page all or nothing (its atomic unit changed, the
    /// stack under it was rebuilt, O_DIRECT alignment no longer met). No
    /// page can be written untorn, so no checkpoint can complete: the
    /// database stops rather than go on acknowledging commits whose WAL
    /// it can never recycle. Every acknowledged commit is in the WAL; an
    /// opening with `double_writes` recovers it (its page writes go
    /// through the double-write area).
    #[error("fatal: an atomic write of a {unit}-byte page was refused on {path} ({source}): this device or file system no longer writes a page all or nothing; the database stops. Reopen it with torn_page_protection = double_writes to recover (its recovery writes pages through the double-write area), or where atomic writes work")]
    AtomicWriteRefused {
        path: PathBuf,
        unit: u32,
        #[source]
        source: std::io::Error,
    },

    /// A previous fsync failure poisoned the file layer: no further writes
    /// or syncs are allowed in this process.
    #[error("fatal: the file layer is stopped after an earlier fsync failure on {path}")]
    Poisoned { path: PathBuf },

    /// An earlier failure stopped the database (a failed fsync, a failed
    /// change): nothing more is read or written in this process.
    #[error("the database is stopped after a failure ({0}); reopen it to recover from the WAL")]
    Stopped(String),

    /// Bytes on disk are not what they must be.
    #[error("corruption in {path} at {location}: {detail}")]
    Corruption {
        path: PathBuf,
        /// Where in the file: "block 17", "offset 8192", "LSN 0/1A2B".
        location: String,
        detail: String,
    },

    /// A page could not be read (EIO: a bad sector, or a sector a write
    /// was cut off in at a power loss).
    #[error("cannot read {path} block {block}: {source} (an unreadable sector)")]
    UnreadablePage {
        path: PathBuf,
        block: u64,
        #[source]
        source: std::io::Error,
    },

    /// A page failed its checksum.
    #[error(
        "checksum mismatch in {path} block {block}: calculated {calculated:#x}, stored {stored:#x}"
    )]
    ChecksumMismatch {
        path: PathBuf,
        block: u64,
        calculated: u32,
        stored: u32,
    },

    /// A setting has a value outside its range, or contradicts the database.
    #[error("invalid setting {name}: {detail}")]
    InvalidSetting { name: &'static str, detail: String },

    /// The database was created with other fixed sizes than the ones asked for.
    #[error("setting {name} mismatch: the database was created with {on_disk}, but {requested} was requested")]
    SettingMismatch {
        name: &'static str,
        on_disk: String,
        requested: String,
    },

    /// The directory is missing or is not an untorn database.
    #[error("{path} is not an untorn database: {detail}")]
    NotADatabase { path: PathBuf, detail: String },

    /// Another opening (in this process or another), or a tool reading it,
    /// holds the database directory's lock file (`untorn.lock`): two
    /// openings would write over each other's WAL.
    #[error("database directory {dir} is in use by {holder}, which holds the lock on {lock_file}; stop it or wait for it to end")]
    InUse {
        dir: PathBuf,
        lock_file: PathBuf,
        /// The holder's PID as the lock file names it (none for tools).
        pid: Option<u32>,
        holder: String,
    },

    /// The directory already holds a database.
    #[error("{path} already holds a database")]
    AlreadyExists { path: PathBuf },

    /// A transaction was chosen to end so that transactions do not wait
    /// for each other forever (a cycle of row-lock waits). Retrying the whole transaction is
    /// safe: nothing it wrote reached a page or the WAL.
    #[error("transaction {xid} aborted to avoid a deadlock on a row lock held by transaction {holder}; retry it")]
    Deadlock { xid: u64, holder: u64 },

    /// A commit gave up before applying anything: for many rounds in a
    /// row other commits split or filled the leaves it needed first.
    /// Nothing it wrote reached a page or the WAL; retrying the whole
    /// transaction is safe (SQLSTATE 40001 to SQL, as PostgreSQL's
    /// serialization failures).
    #[error("transaction {xid} could not commit: {why}; retry it")]
    CommitContention { xid: u64, why: String },

    /// A wait for a row lock ended because the transaction's owner asked
    /// it to stop (a cancel, a statement timeout, a shutdown): the SQL
    /// layer reports why.
    #[error("transaction {xid} stopped waiting for a row lock: its statement was interrupted")]
    LockWaitInterrupted { xid: u64 },

    /// An insert found its key already there (SQLSTATE 23505 to SQL).
    #[error("duplicate key {key:?} in table {table:?}")]
    DuplicateKey { table: String, key: Vec<u8> },

    /// A transaction's write set reached `max_write_set_rows` or
    /// `max_write_set_bytes` with `temp_file_limit = 0`, which keeps
    /// every write set in memory (SQLSTATE 54000 to SQL).
    #[error(
        "write set too large: at most {rows} rows and {bytes} bytes per transaction in memory, \
         and temp_file_limit = 0 lets none spill to disk"
    )]
    WriteSetFull { rows: usize, bytes: usize },

    /// A transaction's spilled write set reached `temp_file_limit`
    /// (SQLSTATE 53400 to SQL, as PostgreSQL's temporary files).
    #[error("temporary file size exceeds temp_file_limit ({limit} bytes): the transaction's write set is too large")]
    TempFileLimit { limit: u64 },

    /// A commit would pin more leaves than half the buffer pool, which it
    /// must hold at once to apply (SQLSTATE 54000 to SQL).
    #[error(
        "transaction {xid} touches more than {max_leaves} leaf pages, half of the buffer pool's {frames} frames, \
         which it must hold at once to commit: commit in smaller transactions or raise buffer_pool_size"
    )]
    TooManyLeaves {
        xid: u64,
        max_leaves: usize,
        frames: usize,
    },

    /// The named table does not exist.
    #[error("table {0:?} does not exist")]
    NoSuchTable(String),

    /// A key or row is larger than a page can hold.
    #[error("{what} of {len} bytes is too large: the limit with {page_size}-byte pages is {limit} bytes")]
    TooLarge {
        what: &'static str,
        len: usize,
        limit: usize,
        page_size: u32,
    },

    /// A transaction's commit record could outgrow the WAL's record limit:
    /// refused in prepare, before any change, so nothing of it happened
    /// and the database goes on. Commit the work in smaller transactions.
    #[error(
        "transaction {xid} is too large to commit: its WAL record could take {len} bytes \
         ({blocks} pages), over the limit of {limit} bytes per record (or {max_blocks} pages); \
         nothing was written: commit in smaller transactions"
    )]
    CommitTooLarge {
        xid: u64,
        len: u64,
        blocks: usize,
        limit: u32,
        max_blocks: usize,
    },

    /// A caller asked for something that cannot be done.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Wraps an `std::io::Error` with the file and the operation.
    pub fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            op,
            source,
        }
    }

    /// A failed pwritev2(RWF_ATOMIC) of `unit` bytes: a refusal of atomic
    /// writes (EOPNOTSUPP, EINVAL) is `AtomicWriteRefused`, fatal; any
    /// other error an ordinary I/O error (ENOSPC, EIO).
    pub fn atomic_write(path: impl Into<PathBuf>, unit: u32, source: std::io::Error) -> Error {
        match source.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EINVAL) => Error::AtomicWriteRefused {
                path: path.into(),
                unit,
                source,
            },
            _ => Error::io(path, "pwritev2 (RWF_ATOMIC)", source),
        }
    }

    /// A corruption error naming the file and where in it.
    pub fn corruption(
        path: impl Into<PathBuf>,
        location: impl Into<String>,
        detail: impl Into<String>,
    ) -> Error {
        Error::Corruption {
            path: path.into(),
            location: location.into(),
            detail: detail.into(),
        }
    }

    /// True for errors after which the process must stop and recover.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::FsyncFailed { .. }
                | Error::Poisoned { .. }
                | Error::Stopped(_)
                | Error::AtomicWriteRefused { .. }
        )
    }

    /// True when retrying the transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Deadlock { .. } | Error::CommitContention { .. }
        )
    }

    /// True when the disk is full (ENOSPC).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                source.raw_os_error() == Some(libc::ENOSPC)
                    || source.kind() == std::io::ErrorKind::StorageFull
            }
            _ => false,
        }
    }
}
