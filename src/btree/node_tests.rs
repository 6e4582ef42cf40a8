//! Tests of the node format: a leaf against a BTreeMap model, compaction,
//! corruption that must be refused without a panic, and the size limits.
//! The page helpers here serve node_split_tests.rs too.

use super::*;
use crate::btree::node_check::check_node;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

pub(in crate::btree) const SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

pub(in crate::btree) fn leaf(size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size];
    init_leaf(&mut b, 3, 9, &[], None);
    b
}

pub(in crate::btree) fn val(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

pub(in crate::btree) fn leaf_entries(b: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..count(b))
        .map(|i| (key_at(b, i).to_vec(), value_at(b, i).to_vec()))
        .collect()
}

pub(in crate::btree) fn inner_entries(b: &[u8]) -> Vec<(Vec<u8>, u32)> {
    (0..count(b))
        .map(|i| (key_at(b, i).to_vec(), child_at(b, i)))
        .collect()
}

fn assert_model(b: &[u8], model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    check_node(b).unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(leaf_entries(b), want);
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, usize, u8),
    Update(usize, usize, u8),
    Delete(usize),
    Compact,
}

fn op_strategy(size: usize) -> impl Strategy<Value = Op> {
    let maxv = max_value_len(size);
    let maxk = max_key_len(size);
    // Mostly small keys from a small alphabet (collisions), sometimes long.
    let key = prop_oneof![
        4 => prop::collection::vec(0u8..4, 0..6),
        1 => prop::collection::vec(any::<u8>(), 0..=maxk),
    ];
    let vlen = prop_oneof![4 => 0usize..64, 1 => 0..=maxv];
    prop_oneof![
        4 => (key, vlen.clone(), any::<u8>()).prop_map(|(k, l, s)| Op::Insert(k, l, s)),
        3 => (any::<usize>(), vlen, any::<u8>()).prop_map(|(i, l, s)| Op::Update(i, l, s)),
        2 => any::<usize>().prop_map(Op::Delete),
        1 => Just(Op::Compact),
    ]
}

fn run_ops(size: usize, ops: &[Op]) {
    let mut b = leaf(size);
    let mut model = BTreeMap::new();
    for op in ops {
        match op {
            Op::Insert(k, l, s) => {
                if model.contains_key(k) {
                    continue;
                }
                let v = val(*s, *l);
                let room = room_for_leaf_change(&b, k, v.len(), false);
                let r = leaf_insert(&mut b, k, &v);
                assert_eq!(
                    r.is_ok(),
                    room,
                    "room_for_leaf_change disagrees with leaf_insert"
                );
                if r.is_ok() {
                    model.insert(k.clone(), v);
                }
            }
            Op::Update(i, l, s) => {
                if model.is_empty() {
                    continue;
                }
                let k = model.keys().nth(i % model.len()).unwrap().clone();
                let v = val(*s, *l);
                let room = room_for_leaf_change(&b, &k, v.len(), true);
                let before = b.clone();
                let r = leaf_update(&mut b, &k, &v);
                assert_eq!(
                    r.is_ok(),
                    room,
                    "room_for_leaf_change disagrees with leaf_update"
                );
                if r.is_ok() {
                    model.insert(k, v);
                } else {
                    assert_eq!(b, before, "a refused change left the page untouched");
                }
            }
            Op::Delete(i) => {
                if model.is_empty() {
                    assert!(!leaf_delete(&mut b, b"absent"));
                    continue;
                }
                let k = model.keys().nth(i % model.len()).unwrap().clone();
                assert!(leaf_delete(&mut b, &k));
                assert!(!leaf_delete(&mut b, &k));
                model.remove(&k);
            }
            Op::Compact => {
                let free = free_space(&b);
                compact(&mut b);
                assert_eq!(contiguous_free(&b), free);
            }
        }
        assert_model(&b, &model);
        for (k, v) in &model {
            assert_eq!(leaf_get(&b, k), Some(&v[..]));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn leaf_ops_match_model_4k(ops in prop::collection::vec(op_strategy(4096), 1..300)) {
        run_ops(4096, &ops);
    }

    #[test]
    fn leaf_ops_match_model_32k(ops in prop::collection::vec(op_strategy(32768), 1..600)) {
        run_ops(32768, &ops);
    }
}

#[test]
fn compaction_recovers_fragmentation() {
    for size in SIZES {
        let mut b = leaf(size);
        let mut i = 0u32;
        while leaf_insert(&mut b, &i.to_be_bytes(), &val(1, 100)).is_ok() {
            i += 1;
        }
        // Shrink every value: the page is fragmented, not contiguously free.
        for j in 0..i {
            leaf_update(&mut b, &j.to_be_bytes(), &val(2, 10)).unwrap();
        }
        check_node(&b).unwrap();
        let big = (contiguous_free(&b) + 1).min(max_value_len(size));
        let need = leaf_cell_size(4, big);
        assert!(
            contiguous_free(&b) < need && need <= free_space(&b),
            "size {size}"
        );
        assert!(room_for_leaf_change(
            &b,
            &u32::MAX.to_be_bytes(),
            big,
            false
        ));
        leaf_insert(&mut b, &u32::MAX.to_be_bytes(), &val(3, big)).unwrap();
        check_node(&b).unwrap();
        assert_eq!(
            leaf_get(&b, &u32::MAX.to_be_bytes()),
            Some(&val(3, big)[..])
        );
        // Growing a value also compacts; the key keeps its place.
        let k = 0u32.to_be_bytes();
        let grow = 10 + free_space(&b) - contiguous_free(&b).min(free_space(&b));
        let grow = grow.min(max_value_len(size));
        if room_for_leaf_change(&b, &k, grow, true) {
            leaf_update(&mut b, &k, &val(4, grow)).unwrap();
            check_node(&b).unwrap();
            assert_eq!(key_at(&b, 0), &k);
        }
    }
}

#[test]
fn limits_hold_four_max_cells_with_max_fences() {
    for size in SIZES {
        let (k, v) = (max_key_len(size), max_value_len(size));
        let low = vec![0x01; k];
        let high = vec![0xFF; k];
        let mut b = vec![0u8; size];
        init_leaf(&mut b, 1, 2, &low, Some(&high));
        for i in 0..4u8 {
            let mut key = vec![0x10 * (i + 1); k];
            key[0] = 0x02 + i;
            leaf_insert(&mut b, &key, &val(i, v)).unwrap();
        }
        check_node(&b).unwrap();
        let mut b = vec![0u8; size];
        init_inner(&mut b, 1, 2, &low, Some(&high), 1);
        inner_insert(&mut b, &low, 10).unwrap();
        for i in 0..4u8 {
            let mut key = vec![0x20; k];
            key[0] = 0x02 + i;
            inner_insert(&mut b, &key, 11 + i as u32).unwrap();
        }
        check_node(&b).unwrap();
    }
}

/// Pages of both kinds and several fill patterns to corrupt.
fn sample_pages(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for size in SIZES {
        let mut b = vec![0u8; size];
        init_leaf(&mut b, 1, 2, b"a", Some(b"t"));
        for i in 0..rng.gen_range(1..200u32) {
            let mut k = b"b".to_vec();
            k.extend_from_slice(&i.to_be_bytes());
            let ok = leaf_insert(&mut b, &k, &val(i as u8, rng.gen_range(0..40))).is_ok();
            if ok && i % 3 == 0 {
                let _ = leaf_update(&mut b, &k, &val(0, rng.gen_range(0..10)));
            }
        }
        out.push(b);
        let mut b = vec![0u8; size];
        make_root_inner(&mut b, 1, 2, 1, 5, b"k", 6);
        for i in 0..rng.gen_range(1..100u32) {
            let mut k = b"l".to_vec();
            k.extend_from_slice(&i.to_be_bytes());
            let _ = inner_insert(&mut b, &k, i);
        }
        out.push(b);
    }
    out
}

/// Everything a tree does with a page after check_node passed.
fn exercise(b: &mut [u8]) {
    let _ = (
        count(b),
        free_space(b),
        low_fence(b),
        high_fence(b),
        level(b),
    );
    for i in 0..count(b) {
        let k = key_at(b, i).to_vec();
        assert_eq!(search(b, &k), Ok(i));
        if is_leaf(b) {
            let _ = value_at(b, i);
        } else {
            let _ = child_at(b, i);
        }
    }
    let probe = low_fence(b).to_vec();
    if is_leaf(b) {
        if search(b, &probe).is_err() && covers(b, &probe) {
            let _ = leaf_insert(b, &probe, b"x");
        }
        if count(b) > 0 {
            let k = key_at(b, 0).to_vec();
            let _ = leaf_update(b, &k, &[7; 30]);
            leaf_delete(b, &k);
        }
    } else {
        let _ = inner_find_child(b, &probe);
    }
    compact(b);
    check_node(b).unwrap();
}

#[test]
fn check_node_refuses_corruption_without_panicking() {
    let mut rng = StdRng::seed_from_u64(3);
    let pages = sample_pages(&mut rng);
    for p in &pages {
        check_node(p).unwrap();
    }
    let (mut refused, mut passed) = (0, 0);
    for round in 0..40_000 {
        let mut b = pages[round % pages.len()].clone();
        let (lo, up, sp) = (lower(&b), upper(&b), special(&b));
        for _ in 0..rng.gen_range(1..4) {
            // Aim at the header pointers, the slots, the cells and the
            // special area.
            let at = match rng.gen_range(0..4) {
                0 => rng.gen_range(16..24),
                1 => rng.gen_range(PAGE_HEADER_SIZE..lo.max(PAGE_HEADER_SIZE + 1)),
                2 => rng.gen_range(up..sp.max(up + 1)),
                _ => rng.gen_range(sp..b.len()),
            };
            let at = at.min(b.len() - 1);
            if rng.gen_bool(0.5) {
                b[at] ^= 1 << rng.gen_range(0..8);
            } else {
                b[at] = rng.gen();
            }
        }
        match check_node(&b) {
            Err(_) => refused += 1,
            Ok(()) => {
                passed += 1;
                exercise(&mut b);
            }
        }
    }
    assert!(
        refused > 10_000 && passed > 100,
        "refused {refused}, passed {passed}"
    );
}

#[test]
fn check_node_names_specific_faults() {
    let mut b = leaf(4096);
    for k in [b"a", b"b", b"c"] {
        leaf_insert(&mut b, k, b"vv").unwrap();
    }
    check_node(&b).unwrap();
    // Swapped slots: keys out of order.
    let mut c = b.clone();
    c.swap(32, 34);
    c.swap(33, 35);
    assert!(check_node(&c).unwrap_err().contains("key"));
    // A slot pointing into the special area.
    let mut c = b.clone();
    wr16(&mut c, 32, special(&b) as u16);
    assert!(check_node(&c).is_err());
    // Wrong fragmentation count.
    let mut c = b.clone();
    set_frag(&mut c, 1);
    assert!(check_node(&c).unwrap_err().contains("fragmentation"));
    // Overlapping cells with the byte accounting kept right: shrink both
    // values (12 bytes of fragmentation), then stretch "b"'s cell 3 bytes
    // into "a"'s and claim only 3 bytes of fragmentation.
    let mut c = leaf(4096);
    leaf_insert(&mut c, b"a", &[1; 10]).unwrap();
    leaf_insert(&mut c, b"b", &[2; 10]).unwrap();
    leaf_update(&mut c, b"a", &[1; 4]).unwrap();
    leaf_update(&mut c, b"b", &[2; 4]).unwrap();
    check_node(&c).unwrap();
    let (off_a, off_b) = (slot(&c, 0), slot(&c, 1));
    assert_eq!(off_a, off_b + 15);
    wr16(&mut c, off_b + 2, 13);
    set_frag(&mut c, 3);
    assert!(check_node(&c).unwrap_err().contains("overlap"));
    // Not a node.
    let mut c = b.clone();
    wr16(&mut c, OFF_KIND, PageKind::Raw as u16);
    assert!(check_node(&c).unwrap_err().contains("kind"));
    // A leaf key below the low fence.
    let mut c = vec![0u8; 4096];
    init_leaf(&mut c, 1, 2, b"b", None);
    leaf_insert(&mut c, b"c", b"").unwrap();
    let off = slot(&c, 0);
    c[off + LEAF_HDR] = b'a';
    assert!(check_node(&c).unwrap_err().contains("low fence"));
    // Truncated buffer.
    assert!(check_node(&b[..4000]).is_err());
}

#[test]
fn freed_bytes_are_zeroed() {
    let mut b = leaf(4096);
    leaf_insert(&mut b, b"k1", &[0xAA; 100]).unwrap();
    leaf_insert(&mut b, b"k2", &[0xBB; 100]).unwrap();
    leaf_update(&mut b, b"k1", &[0xCC; 10]).unwrap();
    leaf_delete(&mut b, b"k2");
    assert!(!b.iter().any(|&x| x == 0xAA || x == 0xBB));
    let (lo, up) = (lower(&b), upper(&b));
    assert!(b[lo..up].iter().all(|&x| x == 0));
}
