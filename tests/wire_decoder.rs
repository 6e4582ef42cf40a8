//! Fuzzing the protocol decoder `untorn serve` reads every client byte
//! with: random and mutated frames never panic, and decoding never
//! allocates more than a small multiple of the bytes it was given (a
//! frame's length field is checked against the per-message limits and
//! element counts against the bytes present, before anything is
//! reserved).
//!
//! One test in its own binary: the counting allocator below sees every
//! allocation of the process, so no other test may run beside it.

use bytes::{BufMut, BytesMut};
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use untorn::rng::SplitMix64 as Rng;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
        PEAK.fetch_max(now, Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![kind];
    f.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    f.extend_from_slice(body);
    f
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// Well-formed frames of every kind pgbench and sysbench send.
fn seeds() -> Vec<Vec<u8>> {
    let mut parse = Vec::new();
    cstr(&mut parse, "sbstmt1");
    cstr(&mut parse, "SELECT c FROM sbtest1 WHERE id=$1");
    parse.extend_from_slice(&1i16.to_be_bytes());
    parse.extend_from_slice(&20i32.to_be_bytes());
    let mut bind = Vec::new();
    cstr(&mut bind, "");
    cstr(&mut bind, "sbstmt1");
    bind.extend_from_slice(&0i16.to_be_bytes());
    bind.extend_from_slice(&1i16.to_be_bytes());
    bind.extend_from_slice(&2i32.to_be_bytes());
    bind.extend_from_slice(b"42");
    bind.extend_from_slice(&1i16.to_be_bytes());
    bind.extend_from_slice(&1i16.to_be_bytes());
    let mut describe = vec![b'P'];
    cstr(&mut describe, "");
    let mut execute = Vec::new();
    cstr(&mut execute, "");
    execute.extend_from_slice(&0i32.to_be_bytes());
    let mut query = Vec::new();
    cstr(
        &mut query,
        "UPDATE pgbench_accounts SET abalance = abalance + -1 WHERE aid = 7;",
    );
    vec![
        frame(b'P', &parse),
        frame(b'B', &bind),
        frame(b'D', &describe),
        frame(b'E', &execute),
        frame(b'S', &[]),
        frame(b'Q', &query),
        frame(b'd', b"1\t1\t0\t\n"),
        frame(b'c', &[]),
        frame(b'X', &[]),
        frame(b'p', b"md5abc\0"),
    ]
}

fn mutate(rng: &mut Rng, mut f: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 if !f.is_empty() => {
                let i = rng.below(f.len() as u64) as usize;
                f[i] ^= 1 << rng.below(8);
            }
            1 if !f.is_empty() => f.truncate(rng.below(f.len() as u64) as usize),
            2 if f.len() >= 5 => {
                // A lying length field: small, negative or huge.
                let lie = match rng.below(3) {
                    0 => rng.below(16) as i32,
                    1 => -(rng.below(1 << 20) as i32),
                    _ => (rng.below(i32::MAX as u64)) as i32,
                };
                f[1..5].copy_from_slice(&lie.to_be_bytes());
            }
            3 if f.len() > 7 => {
                // A lying element count (parameters, formats) mid-body.
                let i = 5 + rng.below(f.len() as u64 - 7) as usize;
                let count = [0x7fffu16, 0xffff, 0x8000][rng.below(3) as usize];
                f[i..i + 2].copy_from_slice(&count.to_be_bytes());
            }
            _ => {
                let extra = rng.below(32) as usize;
                f.extend((0..extra).map(|_| rng.below(256) as u8));
            }
        }
    }
    f
}

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(64) as usize;
    (0..n).map(|_| rng.below(256) as u8).collect()
}

/// Decodes frames from `input` until it is used up or refused; returns
/// the peak of live bytes allocated meanwhile, above what was live
/// before.
fn decode_all(input: &[u8], ctx: &DecodeContext) -> usize {
    let mut buf = BytesMut::with_capacity(input.len());
    buf.put_slice(input);
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    for _ in 0..64 {
        match PgWireFrontendMessage::decode(&mut buf, ctx) {
            Ok(Some(msg)) => drop(msg),
            Ok(None) | Err(_) => break,
        }
    }
    PEAK.load(Relaxed).saturating_sub(base)
}

#[test]
fn random_and_mutated_frames_never_panic_nor_overallocate() {
    let mut rng = Rng::new(2026);
    let seeds = seeds();
    let after_startup = {
        let mut c = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
        c.awaiting_frontend_ssl = false;
        c.awaiting_frontend_startup = false;
        c
    };
    let at_connect = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
    let mut decoded_some = 0;
    for i in 0..60_000u64 {
        let input = match i % 3 {
            0 => random_bytes(&mut rng),
            1 => mutate(&mut rng, seeds[(i as usize / 3) % seeds.len()].clone()),
            // Several frames back to back, one of them damaged.
            _ => {
                let mut s = Vec::new();
                for _ in 0..3 {
                    s.extend(seeds[rng.below(seeds.len() as u64) as usize].clone());
                }
                mutate(&mut rng, s)
            }
        };
        let ctx = if i % 10 == 0 {
            &at_connect
        } else {
            &after_startup
        };
        let peak = decode_all(&input, ctx);
        let bound = 4 * input.len() + 4096;
        assert!(
            peak <= bound,
            "decoding {} bytes allocated {peak} bytes (bound {bound}): {input:?}",
            input.len()
        );
        decoded_some += usize::from(peak > 0);
    }
    // The loop exercised the decoder, not only its length checks.
    assert!(decoded_some > 10_000, "only {decoded_some} inputs decoded");
    // Unmutated frames decode to what they are.
    for s in &seeds {
        let mut buf = BytesMut::from(&s[..]);
        assert!(matches!(
            PgWireFrontendMessage::decode(&mut buf, &after_startup),
            Ok(Some(_))
        ));
    }
    a_frame_over_the_message_limit_is_refused_before_it_arrives();
}

fn a_frame_over_the_message_limit_is_refused_before_it_arrives() {
    // A Sync claiming 20,000 bytes: small messages are limited to 10,000,
    // so the claim alone is refused; nothing waits for the bytes.
    let mut ctx = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
    ctx.awaiting_frontend_ssl = false;
    ctx.awaiting_frontend_startup = false;
    let mut buf = BytesMut::new();
    buf.put_u8(b'S');
    buf.put_i32(20_000);
    assert!(PgWireFrontendMessage::decode(&mut buf, &ctx).is_err());
    // A Query claiming more than 1 GB, PostgreSQL's limit too.
    let mut buf = BytesMut::new();
    buf.put_u8(b'Q');
    buf.put_i32(0x4000_0000);
    assert!(PgWireFrontendMessage::decode(&mut buf, &ctx).is_err());
}
