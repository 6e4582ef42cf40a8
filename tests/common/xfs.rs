//! An XFS image on a loop device, for the tests of atomic writes (issue
//! 40): they need root, /dev/loop-control and mkfs.xfs
//! (scripts/install-clients installs xfsprogs as root); where one is
//! missing, [`XfsLoop::new`] says which, and the test says on stderr that
//! it could not run instead of checking anything.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An XFS image (2 GiB, sparse: room for a double-write area) mounted on a
/// loop device, unmounted on drop.
pub struct XfsLoop {
    _dir: tempfile::TempDir,
    pub mount: PathBuf,
}

impl XfsLoop {
    pub fn new(reflink: bool) -> Result<XfsLoop, String> {
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".into());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err("no /dev/loop-control".into());
        }
        let dir = tempfile::tempdir().unwrap();
        let (img, mount) = (dir.path().join("xfs.img"), dir.path().join("mnt"));
        std::fs::create_dir(&mount).unwrap();
        std::fs::File::create(&img)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let mkfs = Command::new("mkfs.xfs")
            .args(["-q", "-m", if reflink { "reflink=1" } else { "reflink=0" }])
            .arg(&img)
            .output()
            .map_err(|e| format!("no mkfs.xfs ({e}): apt-get install xfsprogs"))?;
        if !mkfs.status.success() {
            return Err(format!(
                "mkfs.xfs: {}",
                String::from_utf8_lossy(&mkfs.stderr)
            ));
        }
        let m = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mount)
            .output()
            .unwrap();
        if !m.status.success() {
            return Err(format!(
                "mount -o loop: {}",
                String::from_utf8_lossy(&m.stderr)
            ));
        }
        Ok(XfsLoop { _dir: dir, mount })
    }
}

impl Drop for XfsLoop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}
