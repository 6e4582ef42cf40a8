//! `untorn probe DIR`: what the file system and the device under DIR say
//! about torn writes: the sector (which WAL flushes are padded to) and
//! statx's atomic-write figures, and whether a page would be written untorn
//! by the device, by the file system's software fallback, or not at all
//! (issue 40; src/file/atomic.rs).

use std::path::Path;
use std::process::ExitCode;
use untorn::file::atomic::{AtomicPageWrites, AtomicWrites, DeviceAtomicWrites};
use untorn::file::sector::probe_sector_size;

pub fn run(dir: &Path, page_size: u32, json: bool) -> untorn::Result<ExitCode> {
    let file = AtomicWrites::probe(dir).map_err(|e| untorn::Error::io(dir, "statx", e))?;
    let device = DeviceAtomicWrites::probe(dir);
    let sector = probe_sector_size(dir);
    let verdict = file.page_writes(page_size);
    if json {
        let v = serde_json::json!({
            "dir": dir, "sector_size": sector, "statx": file, "device": device,
            "page_size": page_size, "page_writes": verdict,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("JSON of plain values")
        );
        return Ok(ExitCode::SUCCESS);
    }
    let bytes = |n: u32| {
        if n == 0 {
            "0 (none)".to_string()
        } else {
            n.to_string()
        }
    };
    println!("{}", dir.display());
    match sector {
        Some(s) => println!("  sector (sysfs, the larger of logical and physical): {s}"),
        None => println!("  sector: no block device in sysfs (4096 is assumed)"),
    }
    if file.reported {
        println!(
            "  statx atomic write unit min:          {}",
            bytes(file.unit_min)
        );
        println!(
            "  statx atomic write unit max:          {}",
            bytes(file.unit_max)
        );
        println!(
            "  statx atomic write unit max opt:      {}",
            bytes(file.unit_max_opt)
        );
        println!(
            "  statx atomic write segments max:      {}",
            file.segments_max
        );
    } else {
        println!(
            "  statx: no atomic write figures (kernel before 6.11, or the file system has none)"
        );
    }
    println!(
        "  O_DIRECT alignment (memory, offset):  {}, {}",
        file.dio_mem_align, file.dio_offset_align
    );
    match device {
        Some(d) => println!(
            "  device queue atomic_write unit min/max, max bytes, boundary: {} / {}, {}, {}",
            d.unit_min, d.unit_max, d.max_bytes, d.boundary
        ),
        None => println!("  device: no atomic_write_* in sysfs"),
    }
    println!(
        "  a page of {page_size} bytes: {}",
        match verdict {
            AtomicPageWrites::Hardware => "written untorn by the device (RWF_ATOMIC within unit max opt)",
            AtomicPageWrites::SoftwareFallback =>
                "written untorn by the file system's software fallback (RWF_ATOMIC above unit max opt: copy-on-write, about half the write rate)",
            AtomicPageWrites::Unsupported => "not written untorn: full_pages or double_writes protect it",
        }
    );
    Ok(ExitCode::SUCCESS)
}
