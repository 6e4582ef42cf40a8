use super::*;
use crate::crashlab::sim::TraceKind;
use crate::db::Database;
use crate::file::LockMode::{Exclusive, Shared};
use crate::options::Options;

fn lock_file(fs: &SimFileSystem, opts: OpenOptions) -> Arc<dyn File> {
    fs.create_dir_all(dir()).unwrap();
    fs.open(&dir().join("lock"), FileKind::Lock, opts).unwrap()
}

#[test]
fn a_lock_belongs_to_its_handle_as_an_ofd_lock_does() {
    let fs = new_fs();
    let a = lock_file(&fs, OpenOptions::create());
    let b = lock_file(&fs, OpenOptions::create());
    assert!(a.try_lock(Exclusive).unwrap());
    assert!(a.try_lock(Exclusive).unwrap(), "again: kept");
    assert!(!b.try_lock(Exclusive).unwrap());
    assert!(!b.try_lock(Shared).unwrap());
    assert!(a.try_lock(Shared).unwrap(), "converted");
    assert!(b.try_lock(Shared).unwrap());
    assert!(!a.try_lock(Exclusive).unwrap(), "b shares it");
    assert_eq!(fs.locked_files(), 1);
    drop(b);
    assert!(a.try_lock(Exclusive).unwrap());
    let ro = lock_file(&fs, OpenOptions::read_only());
    let e = ro.try_lock(Exclusive).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::EBADF), "{e}");
    drop(a);
    assert_eq!(fs.locked_files(), 0, "dropping the handle released it");
    assert!(ro.try_lock(Shared).unwrap());
    let refused = fs
        .trace()
        .iter()
        .any(|t| t.op == TraceKind::Lock && t.note.as_deref() == Some("Exclusive, refused"));
    assert!(refused, "locks are traced");
}

/// A crash or the death of the process releases every lock, as exit does
/// in the kernel; the stale handles, dropped later, release nothing of
/// the next holder's.
#[test]
fn a_crash_or_a_process_death_releases_every_lock() {
    for process_only in [false, true] {
        let fs = new_fs();
        let old = lock_file(&fs, OpenOptions::create());
        assert!(old.try_lock(Exclusive).unwrap());
        // A power cut refuses changes, not locks: the holder is alive.
        fs.update_faults(|f| f.power_cut_after = Some(0));
        let other = lock_file(&fs, OpenOptions::create());
        assert!(!other.try_lock(Exclusive).unwrap());
        drop(other);
        if process_only {
            fs.process_crash();
        } else {
            fs.crash(1, &CrashConfig::default());
        }
        assert_eq!(fs.locked_files(), 0);
        let new = lock_file(&fs, OpenOptions::create());
        assert!(new.try_lock(Exclusive).unwrap());
        let e = old.try_lock(Exclusive).unwrap_err();
        assert_eq!(os_code(&e), Some(libc::ESTALE), "{e}");
        drop(old);
        let third = lock_file(&fs, OpenOptions::create());
        assert!(!third.try_lock(Shared).unwrap(), "still the new holder's");
    }
}

#[test]
fn a_fork_holds_no_locks() {
    let fs = new_fs();
    let held = lock_file(&fs, OpenOptions::create());
    assert!(held.try_lock(Exclusive).unwrap());
    let copy = fs.fork();
    assert_eq!(copy.locked_files(), 0);
    assert!(lock_file(&copy, OpenOptions::create())
        .try_lock(Exclusive)
        .unwrap());
    assert_eq!(fs.locked_files(), 1);
}

fn in_use_pid(e: Error) -> Option<u32> {
    match e {
        Error::InUse { pid, .. } => pid,
        other => panic!("not InUse: {other}"),
    }
}

/// The engine on the simulation: a second opening is refused while the
/// first lives, the lock goes with a drop or a crash, and a restart after
/// a crash is not refused even while the crashed opening is still held.
#[test]
fn a_database_on_the_simulation_is_opened_once_at_a_time() {
    let stats = Arc::new(IoStats::default());
    let fs = new_fs();
    let sim = || -> Arc<dyn FileSystem> { Arc::new(fs.clone()) };
    let db_dir = Path::new("/sim/db");
    let open = || Database::open_with(sim(), stats.clone(), db_dir, Options::default());
    let db = Database::create_with(sim(), stats.clone(), db_dir, Options::default()).unwrap();
    let refused = open().err().expect("a second opening is refused");
    assert_eq!(in_use_pid(refused), Some(std::process::id()));
    db.close().unwrap();
    let db = open().unwrap();
    assert_eq!(fs.locked_files(), 1);
    fs.crash(7, &CrashConfig::default());
    let reopened = open().unwrap();
    drop(db);
    assert!(
        open().is_err(),
        "the crashed opening's drop released nothing"
    );
    drop(reopened);
    assert_eq!(fs.locked_files(), 0);
    let table = open().unwrap().create_table("t");
    assert!(table.is_ok());
    // No lock file is left where no database is.
    let e = Database::open_with(sim(), stats, Path::new("/sim/none"), Options::default());
    assert!(matches!(e, Err(Error::NotADatabase { .. })));
    assert!(!fs.exists(Path::new("/sim/none/untorn.lock")));
}
