//! Single-core throughput of the page checksums on one page in cache.
//!
//! The cases run interleaved (A, B, C, A, B, C, ...) for several rounds and each
//! reports its median round, so a frequency change or a noisy neighbour hits every
//! case alike instead of whichever happened to run at the time. A copy of the same
//! page into another buffer is measured alongside: it is the memory-bandwidth figure a
//! checksum is compared with.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::checksum::{self, fnv};
use crate::rng::SplitMix64;
use crate::settings::ChecksumAlgorithm;

/// One measured case.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// What ran, e.g. `fnv avx512`.
    pub name: String,
    /// Decimal gigabytes (1e9 bytes) of page checksummed per second, one core.
    pub gb_per_s: f64,
    /// Nanoseconds per page.
    pub ns_per_page: f64,
}

/// Rounds per case; the median is reported.
const ROUNDS: usize = 9;
/// The block number given to the checksums (any value costs the same).
const BLOCK: u32 = 7;

/// Runs `iters` pages through a case and returns a value that depends on every one.
type CaseFn = Box<dyn FnMut(&[u8], &mut [u8], u64) -> u32>;

struct Case {
    name: String,
    run: CaseFn,
}

/// Wraps a per-page function in its own loop so the function is inlined there and the
/// timing holds no indirect call per page. `black_box` on the input stops the compiler
/// from hoisting the checksum of an unchanging page out of the loop.
fn looped(f: impl Fn(&[u8], &mut [u8]) -> u32 + 'static) -> CaseFn {
    Box::new(move |page, dst, iters| {
        let mut acc = 0u32;
        for _ in 0..iters {
            acc ^= f(black_box(page), black_box(&mut *dst));
        }
        black_box(acc)
    })
}

fn cases() -> Vec<Case> {
    let mut cases = vec![
        Case {
            name: format!(
                "fnv page_checksum (dispatched: {})",
                fnv::selected_variant()
            ),
            run: looped(|p, _| checksum::page_checksum(ChecksumAlgorithm::Fnv, p, BLOCK)),
        },
        Case {
            name: "fnv portable".into(),
            run: looped(|p, _| fnv::checksum_block_portable(p, 0)),
        },
    ];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            let f = |p: &[u8], _: &mut [u8]| unsafe { fnv::checksum_block_avx2(p, 0) };
            cases.push(Case {
                name: "fnv avx2".into(),
                run: looped(f),
            });
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            let f = |p: &[u8], _: &mut [u8]| unsafe { fnv::checksum_block_avx512(p, 0) };
            cases.push(Case {
                name: "fnv avx512".into(),
                run: looped(f),
            });
        }
    }
    cases.push(Case {
        name: "crc32c page_checksum".into(),
        run: looped(|p, _| checksum::page_checksum(ChecksumAlgorithm::Crc32c, p, BLOCK)),
    });
    cases.push(Case {
        name: "memcpy (copy of the page, aligned)".into(),
        run: looped(|p, d| {
            d.copy_from_slice(p);
            u32::from(d[0])
        }),
    });
    cases
}

fn time(case: &mut Case, page: &[u8], dst: &mut [u8], iters: u64) -> Duration {
    let start = Instant::now();
    black_box((case.run)(page, dst, iters));
    start.elapsed()
}

/// Iterations that take about `slice` for this case.
fn calibrate(case: &mut Case, page: &[u8], dst: &mut [u8], slice: Duration) -> u64 {
    let mut iters = 16u64;
    loop {
        let took = time(case, page, dst, iters);
        if took >= Duration::from_millis(2) || iters >= 1 << 40 {
            let per_iter = took.as_secs_f64() / iters as f64;
            return ((slice.as_secs_f64() / per_iter) as u64).max(1);
        }
        iters *= 2;
    }
}

/// Buffers start on a 4 KiB boundary, as pages do in the engine (O_DIRECT-aligned):
/// measured here, a copy into a buffer 16 bytes off that alignment ran at well under
/// half the speed of an aligned one, which would make the copy row mean nothing.
const BUFFER_ALIGN: usize = 4096;

fn aligned(buf: &mut [u8], len: usize) -> &mut [u8] {
    let off = buf.as_ptr().align_offset(BUFFER_ALIGN);
    &mut buf[off..off + len]
}

fn measure(page_size: usize, seconds_per_case: f64) -> Vec<BenchRow> {
    let mut page_buf = vec![0u8; page_size + BUFFER_ALIGN];
    let mut dst_buf = vec![0u8; page_size + BUFFER_ALIGN];
    let page = aligned(&mut page_buf, page_size);
    let dst = aligned(&mut dst_buf, page_size);
    // A fixed pseudo-random page: the checksums' cost does not depend on the content,
    // but an all-zero page could let the copy take a shortcut.
    let mut rng = SplitMix64::new(0x9E37_79B9_7F4A_7C15);
    for b in page.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    let page: &[u8] = page;
    let slice = Duration::from_secs_f64(seconds_per_case / ROUNDS as f64);
    let mut cases = cases();
    let iters: Vec<u64> = cases
        .iter_mut()
        .map(|c| calibrate(c, page, dst, slice))
        .collect();
    let mut samples = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for _ in 0..ROUNDS {
        for (i, case) in cases.iter_mut().enumerate() {
            let took = time(case, page, dst, iters[i]);
            samples[i].push(took.as_secs_f64() * 1e9 / iters[i] as f64);
        }
    }
    cases
        .into_iter()
        .zip(samples)
        .map(|(case, mut ns)| {
            ns.sort_by(f64::total_cmp);
            let ns_per_page = ns[ns.len() / 2];
            BenchRow {
                name: case.name,
                gb_per_s: page_size as f64 / ns_per_page,
                ns_per_page,
            }
        })
        .collect()
}

/// Keeps the measuring thread on the CPU it started on, so a migration does not land
/// in one case's round.
#[cfg(target_os = "linux")]
fn pin_to_current_cpu() {
    // SAFETY: plain libc calls on a zeroed cpu_set_t owned by this frame; pid 0 is
    // the calling thread.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to_current_cpu() {}

/// Measures every case on one core for `page_size`-byte pages (a multiple of 128),
/// spending about `seconds_per_case` on each. Runs on a thread of its own pinned to one
/// CPU, so the caller's affinity is left alone.
pub fn run(page_size: usize, seconds_per_case: f64) -> Vec<BenchRow> {
    assert!(
        page_size >= 128 && page_size.is_multiple_of(128),
        "page size {page_size}"
    );
    assert!(
        seconds_per_case > 0.0,
        "seconds per case {seconds_per_case}"
    );
    std::thread::spawn(move || {
        pin_to_current_cpu();
        measure(page_size, seconds_per_case)
    })
    .join()
    .expect("checksum benchmark thread panicked")
}

/// The CPU's model name (from /proc/cpuinfo) and the features the checksums use.
pub fn cpu_name() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    #[allow(unused_mut)]
    let mut features: Vec<&str> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        for (name, on) in [
            ("avx512f", is_x86_feature_detected!("avx512f")),
            ("avx2", is_x86_feature_detected!("avx2")),
            ("sse4.2", is_x86_feature_detected!("sse4.2")),
        ] {
            if on {
                features.push(name);
            }
        }
    }
    format!(
        "{model} [{}; fnv: {}]",
        features.join(" "),
        fnv::selected_variant()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_reports_a_positive_rate() {
        let rows = run(4096, 0.01);
        assert!(rows.len() >= 4);
        for row in &rows {
            assert!(row.gb_per_s > 0.0 && row.ns_per_page > 0.0, "{row:?}");
        }
        assert!(cpu_name().contains("fnv:"));
    }

    /// `cargo test --release --lib checksum_bench -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, not a test; prints the table"]
    fn print_bench_checksums() {
        println!("{}", cpu_name());
        for size in [8192usize, 4096, 32768] {
            for row in run(size, 0.3) {
                println!(
                    "{size:>6} B  {:<40} {:>8.1} GB/s {:>9.1} ns/page",
                    row.name, row.gb_per_s, row.ns_per_page
                );
            }
        }
    }
}
