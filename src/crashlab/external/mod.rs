//! The crash laboratory for external systems (issue 38): a real database
//! (`untorn serve`, PostgreSQL, MariaDB) runs with an LD_PRELOAD recorder
//! (`record.c`, built at run time by [`recorder`]) that logs every write,
//! sync and directory operation under its directory ([`log`]); crash
//! images are then rebuilt from a snapshot taken before the run and the
//! log replayed to a cut point, each pending write kept, dropped or torn
//! at sector granularity ([`replay`], [`image`]).
//!
//! Replaying the whole log with nothing dropped must give the live
//! directory back byte for byte; any difference is an "unrecorded change"
//! (a write the recorder could not see: mmap, io_uring, a static binary).

pub mod image;
pub mod images;
pub mod log;
pub mod recorder;
pub mod replay;
