//! Crash images: the model of a replayed log ([`Model`]) turned into a
//! directory as a power loss at the cut could leave it, and the checks
//! that the replay itself is faithful (the whole log, nothing dropped,
//! gives the live directory back byte for byte).

use super::replay::{apply_file, apply_name, FileOp, Id, Model};
use crate::rng::SplitMix64;
use std::collections::{BTreeMap, HashMap};
use std::io::Result;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// How pending writes fare at the power loss.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Faults {
    /// Tear writes at sectors (each sector old or new); false: a write is
    /// kept or dropped whole (the untorn control images).
    pub tear: bool,
    /// 512 or 4096.
    pub sector: u64,
}

/// What a crash did, for the report.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct CrashCounts {
    pub pending_writes: u64,
    pub kept: u64,
    pub dropped: u64,
    pub torn: u64,
    pub pending_names: u64,
    pub names_kept: u64,
}

/// A directory's contents: each name a directory or a file's bytes.
pub struct Image {
    pub names: BTreeMap<String, Id>,
    pub files: HashMap<Id, Vec<u8>>,
    pub modes: HashMap<Id, u32>,
    pub dirs: Vec<Id>,
    /// Byte ranges (offset, length) per file where the live directory may
    /// differ: writes in flight when the recorded processes were killed.
    pub in_flight: HashMap<Id, Vec<(u64, u64)>>,
}

/// The directory as the live processes last saw it (everything kept).
pub fn live_view(m: &Model) -> Image {
    let files = m
        .names
        .values()
        .filter(|&&id| !m.inodes[id].dir)
        .map(|&id| (id, m.current(id)))
        .collect();
    let mut img = image_of(m, m.names.clone(), files);
    for &(id, off, len) in m.in_flight.values() {
        img.in_flight.entry(id).or_default().push((off, len));
    }
    img
}

fn image_of(m: &Model, names: BTreeMap<String, Id>, files: HashMap<Id, Vec<u8>>) -> Image {
    Image {
        modes: names.values().map(|&id| (id, m.inodes[id].mode)).collect(),
        dirs: (0..m.inodes.len()).filter(|&id| m.inodes[id].dir).collect(),
        names,
        files,
        in_flight: HashMap::new(),
    }
}

/// A power loss after the replayed records: every pending file operation
/// kept, dropped or (writes, with `faults.tear`) torn, and a random prefix
/// of the pending name operations kept, chosen by `rng`.
pub fn crash(m: &Model, faults: Faults, rng: &mut SplitMix64) -> (Image, CrashCounts) {
    let mut c = CrashCounts::default();
    let mut names = m.durable_names.clone();
    let keep = rng.below(m.pending_names.len() as u64 + 1) as usize;
    for op in &m.pending_names[..keep] {
        apply_name(&mut names, op);
    }
    c.pending_names = m.pending_names.len() as u64;
    c.names_kept = keep as u64;
    let mut files = HashMap::new();
    for &id in names.values() {
        if m.inodes[id].dir || files.contains_key(&id) {
            continue;
        }
        let mut bytes = m.inodes[id].durable.clone();
        for op in &m.inodes[id].pending {
            c.pending_writes += 1;
            let roll = rng.below(if faults.tear { 3 } else { 2 });
            match (roll, op) {
                (0, _) => {
                    c.kept += 1;
                    apply_file(m.log, &mut bytes, op);
                }
                (2, FileOp::Write { off, rec }) => {
                    c.torn += 1;
                    let data = m.log.data(&m.log.records[*rec]);
                    tear(&mut bytes, *off, data, faults.sector, rng);
                }
                (2, _) => {
                    c.kept += 1;
                    apply_file(m.log, &mut bytes, op);
                }
                _ => c.dropped += 1,
            }
        }
        files.insert(id, bytes);
    }
    (image_of(m, names, files), c)
}

/// A write persisting in part: each sector it covers (at absolute file
/// offsets) old or new. A write that extends the file leaves it, half the
/// time, ending at the write's end (sectors not written read as zeros),
/// and otherwise at a random sector boundary inside the write, as ext4
/// with 4 KB blocks can leave an 8 KB page half there.
pub fn tear(bytes: &mut Vec<u8>, off: u64, data: &[u8], sector: u64, rng: &mut SplitMix64) {
    let (start, end) = (off, off + data.len() as u64);
    let old_len = bytes.len() as u64;
    if end > old_len {
        bytes.resize(end as usize, 0);
    }
    let mut s = start;
    while s < end {
        let next = ((s / sector) + 1) * sector;
        let stop = next.min(end);
        if rng.chance(0.5) {
            let from = (s - start) as usize..(stop - start) as usize;
            bytes[s as usize..stop as usize].copy_from_slice(&data[from]);
        }
        s = stop;
    }
    if end > old_len && rng.chance(0.5) {
        let first = old_len.max(start).div_ceil(sector) * sector;
        let boundaries: Vec<u64> = (0..)
            .map(|k| first + k * sector)
            .take_while(|&b| b < end)
            .collect();
        if !boundaries.is_empty() {
            let b = boundaries[rng.below(boundaries.len() as u64) as usize];
            bytes.truncate(b.max(old_len) as usize);
        }
    }
}

impl Image {
    /// Writes the image into `dir` (which must not exist); a file with
    /// several names is written once and hard-linked.
    pub fn write_to(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        let mut written: HashMap<Id, std::path::PathBuf> = HashMap::new();
        for (name, &id) in &self.names {
            if name.is_empty() {
                continue;
            }
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mode = self.modes.get(&id).copied().unwrap_or(0o600);
            match self.files.get(&id) {
                None => {
                    std::fs::create_dir_all(&path)?;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o700))?;
                }
                Some(_) if written.contains_key(&id) => {
                    std::fs::hard_link(&written[&id], &path)?;
                }
                Some(bytes) => {
                    std::fs::write(&path, bytes)?;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o600))?;
                    written.insert(id, path);
                }
            }
        }
        Ok(())
    }

    /// Differences from the directory `live` (regular files and
    /// directories): each is a change the recorder did not see.
    pub fn diff(&self, live: &Path) -> Result<Vec<String>> {
        let mut found = BTreeMap::new();
        walk(live, "", &mut found)?;
        let mut out = Vec::new();
        for (name, bytes) in &found {
            let ours = self.names.get(name).map(|id| self.files.get(id));
            match (bytes, ours) {
                (_, None) => out.push(format!("{name}: in the live directory, not replayed")),
                (None, Some(Some(_))) => {
                    out.push(format!("{name}: a directory, replayed as a file"))
                }
                (Some(_), Some(None)) => {
                    out.push(format!("{name}: a file, replayed as a directory"))
                }
                (Some(live), Some(Some(mine))) if live != mine => {
                    let id = self.names[name];
                    let flying = self.in_flight.get(&id).map_or(&[][..], Vec::as_slice);
                    let Some(at) = first_unexplained(live, mine, flying) else {
                        continue; // only bytes a write in flight may have changed
                    };
                    out.push(format!(
                        "{name}: {} bytes live, {} replayed, first difference at {}",
                        live.len(),
                        mine.len(),
                        if at >= live.len().min(mine.len()) {
                            "the end".into()
                        } else {
                            format!("byte {at}")
                        }
                    ));
                }
                _ => {}
            }
        }
        for name in self.names.keys() {
            if !name.is_empty() && !found.contains_key(name) {
                out.push(format!("{name}: replayed, not in the live directory"));
            }
        }
        Ok(out)
    }
}

/// The first byte where `live` and `replayed` differ (a length difference
/// counts from the shorter's end) outside every in-flight range, if any.
fn first_unexplained(live: &[u8], replayed: &[u8], in_flight: &[(u64, u64)]) -> Option<usize> {
    let explained = |p: usize| {
        in_flight
            .iter()
            .any(|&(off, len)| (off..off.saturating_add(len)).contains(&(p as u64)))
    };
    (0..live.len().max(replayed.len())).find(|&p| live.get(p) != replayed.get(p) && !explained(p))
}

/// Every regular file (with its bytes) and directory (None) under `dir`.
fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Option<Vec<u8>>>) -> Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if meta.is_dir() {
            out.insert(name.clone(), None);
            walk(&e.path(), &format!("{name}/"), out)?;
        } else if meta.is_file() {
            out.insert(name, Some(std::fs::read(e.path())?));
        }
    }
    Ok(())
}

/// Copies `from` (regular files and directories, with their modes) to
/// `to`: the snapshot taken before a recorded run.
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    std::fs::set_permissions(to, std::fs::metadata(from)?.permissions())?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        let target = to.join(e.file_name());
        if meta.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else if meta.is_file() {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::first_unexplained;

    #[test]
    fn differences_inside_a_write_in_flight_are_explained() {
        let replayed = b"aaaaaaaa".to_vec();
        let mut live = replayed.clone();
        live[2..6].copy_from_slice(b"bbbb");
        assert_eq!(first_unexplained(&live, &replayed, &[]), Some(2));
        assert_eq!(first_unexplained(&live, &replayed, &[(2, 4)]), None);
        // One byte outside the announced range is still a difference.
        assert_eq!(first_unexplained(&live, &replayed, &[(3, 3)]), Some(2));
        // An append in flight: the live file longer by what it announced.
        live.extend_from_slice(b"cc");
        assert_eq!(first_unexplained(&live, &replayed, &[(2, 4), (8, 2)]), None);
        assert_eq!(
            first_unexplained(&live, &replayed, &[(2, 4), (8, 1)]),
            Some(9)
        );
    }
}
