//! Tests of the node format: a leaf against a BTreeMap model, splits,
//! repeated inner splits, corruption that must be refused without a panic,
//! and the size limits.

use super::*;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

fn leaf(size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size];
    init_leaf(&mut b, 3, 9, &[], None);
    b
}

fn val(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn leaf_entries(b: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..count(b))
        .map(|i| (key_at(b, i).to_vec(), value_at(b, i).to_vec()))
        .collect()
}

fn inner_entries(b: &[u8]) -> Vec<(Vec<u8>, u32)> {
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

#[test]
fn middle_split_of_max_cells_makes_room_for_one_more() {
    let mut rng = StdRng::seed_from_u64(7);
    for size in SIZES {
        for _ in 0..200 {
            let (k, v) = (max_key_len(size), max_value_len(size));
            let low = vec![0x01; rng.gen_range(0..=k)];
            let mut b = vec![0u8; size];
            init_leaf(&mut b, 1, 2, &low, Some(&vec![0xFF; k]));
            let rand_key = |rng: &mut StdRng| {
                let mut key = vec![0u8; rng.gen_range(1..=k)];
                rng.fill(&mut key[..]);
                key[0] = rng.gen_range(0x02..0xFF);
                key
            };
            let mut model = BTreeMap::new();
            let failed = loop {
                let key = rand_key(&mut rng);
                let value = val(0, rng.gen_range(v / 2..=v));
                if model.contains_key(&key) {
                    continue;
                }
                if leaf_insert(&mut b, &key, &value).is_err() {
                    break (key, value);
                }
                model.insert(key, value);
            };
            let mut r = vec![0u8; size];
            let sep = split(&mut b, &mut r, 77, SplitHint::Middle);
            check_node(&b).unwrap();
            check_node(&r).unwrap();
            let half = if failed.0 < sep { &mut b } else { &mut r };
            leaf_insert(half, &failed.0, &failed.1).expect("a middle split leaves room");
            model.insert(failed.0, failed.1);
            let mut all = leaf_entries(&b);
            all.extend(leaf_entries(&r));
            assert_eq!(all, model.into_iter().collect::<Vec<_>>());
        }
    }
}

/// A row of sibling nodes as one tree level would hold them.
struct Level {
    pages: Vec<Vec<u8>>,
    next_block: u32,
}

impl Level {
    fn find(&self, key: &[u8]) -> usize {
        self.pages
            .iter()
            .position(|p| covers(p, key))
            .expect("some node covers every key")
    }

    fn split_at(&mut self, j: usize, hint: SplitHint) -> Vec<u8> {
        let size = self.pages[j].len();
        let old = self.pages[j].clone();
        let mut right = vec![0u8; size];
        self.next_block += 1;
        let sep = split(&mut self.pages[j], &mut right, self.next_block, hint);
        // The left half is exactly what redo makes from the old page alone.
        let mut redo = old.clone();
        truncate_right(&mut redo, &sep);
        assert_eq!(redo, self.pages[j]);
        assert_eq!(low_fence(&right), &sep[..]);
        assert_eq!(high_fence(&self.pages[j]), Some(&sep[..]));
        assert_eq!(high_fence(&right), high_fence(&old));
        assert_eq!(level(&right), level(&old));
        assert_eq!(
            read_header(&right).unwrap().file_id,
            read_header(&old).unwrap().file_id
        );
        self.pages.insert(j + 1, right);
        sep
    }

    fn check(&self) {
        assert!(low_fence(&self.pages[0]).is_empty());
        assert_eq!(high_fence(self.pages.last().unwrap()), None);
        for w in self.pages.windows(2) {
            assert_eq!(high_fence(&w[0]), Some(low_fence(&w[1])));
        }
        for p in &self.pages {
            check_node(p).unwrap();
        }
    }
}

fn leaf_level_run(size: usize, seed: u64, ascending: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lv = Level {
        pages: vec![leaf(size)],
        next_block: 100,
    };
    let mut model = BTreeMap::new();
    for n in 0..3000u32 {
        let key = if ascending {
            n.to_be_bytes().to_vec()
        } else {
            let mut k = vec![0u8; rng.gen_range(0..20)];
            rng.fill(&mut k[..]);
            k
        };
        if model.contains_key(&key) {
            continue;
        }
        let value = val(n as u8, rng.gen_range(0..200));
        let mut j = lv.find(&key);
        if leaf_insert(&mut lv.pages[j], &key, &value).is_err() {
            let p = &lv.pages[j];
            let edge = key > key_at(p, count(p) - 1).to_vec();
            let hint = if edge {
                SplitHint::RightEdge
            } else {
                SplitHint::Middle
            };
            let before = leaf_entries(p);
            let sep = lv.split_at(j, hint);
            let mut after = leaf_entries(&lv.pages[j]);
            after.extend(leaf_entries(&lv.pages[j + 1]));
            assert_eq!(before, after);
            if hint == SplitHint::RightEdge {
                // The left keeps ~90% of the bytes.
                let used = |p: &[u8]| p.len() - free_space(p);
                assert!(used(&lv.pages[j]) > used(&lv.pages[j + 1]) * 4);
            }
            if key >= sep {
                j += 1;
            }
            leaf_insert(&mut lv.pages[j], &key, &value).expect("room after split");
        }
        model.insert(key, value);
    }
    lv.check();
    let all: Vec<_> = lv.pages.iter().flat_map(|p| leaf_entries(p)).collect();
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    if ascending {
        // 90/10 splits: all but the last leaf are well filled.
        for p in &lv.pages[..lv.pages.len() - 1] {
            assert!(
                free_space(p) * 100 / size < 20,
                "leaf only {}% free",
                free_space(p) * 100 / size
            );
        }
    }
}

#[test]
fn leaf_splits_preserve_entries_and_fences() {
    for (i, size) in SIZES.into_iter().enumerate() {
        leaf_level_run(size, i as u64, false);
        leaf_level_run(size, i as u64, true);
    }
}

#[test]
fn repeated_inner_splits() {
    let mut rng = StdRng::seed_from_u64(11);
    for size in [4096, 32768] {
        let mut root = vec![0u8; size];
        make_root_inner(&mut root, 5, 1, 2, 1000, b"m", 1001);
        check_node(&root).unwrap();
        assert_eq!(inner_find_child(&root, b""), (0, 1000));
        assert_eq!(inner_find_child(&root, b"l\xff"), (0, 1000));
        assert_eq!(inner_find_child(&root, b"m"), (1, 1001));
        assert_eq!(inner_find_child(&root, b"zz"), (1, 1001));
        let mut lv = Level {
            pages: vec![root],
            next_block: 1,
        };
        let mut model: BTreeMap<Vec<u8>, u32> = [(vec![], 1000), (b"m".to_vec(), 1001)].into();
        for child in 2000..6000u32 {
            let mut key = vec![0u8; rng.gen_range(1..=max_key_len(size) / 4)];
            rng.fill(&mut key[..]);
            if model.contains_key(&key) {
                continue;
            }
            let mut j = lv.find(&key);
            if inner_insert(&mut lv.pages[j], &key, child).is_err() {
                let before = inner_entries(&lv.pages[j]);
                let sep = lv.split_at(j, SplitHint::Middle);
                assert_eq!(
                    key_at(&lv.pages[j + 1], 0),
                    &sep[..],
                    "key_0 is the low fence"
                );
                let mut after = inner_entries(&lv.pages[j]);
                after.extend(inner_entries(&lv.pages[j + 1]));
                assert_eq!(before, after);
                if key >= sep {
                    j += 1;
                }
                inner_insert(&mut lv.pages[j], &key, child).expect("room after split");
            }
            model.insert(key, child);
            if child % 7 == 0 {
                // Remove a random non-first entry of some node.
                let j = rng.gen_range(0..lv.pages.len());
                let n = count(&lv.pages[j]);
                if n > 1 {
                    let i = rng.gen_range(1..n);
                    model.remove(key_at(&lv.pages[j], i));
                    inner_remove(&mut lv.pages[j], i);
                }
            }
        }
        lv.check();
        assert!(lv.pages.len() > 3);
        let all: Vec<_> = lv.pages.iter().flat_map(|p| inner_entries(p)).collect();
        assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
        // Routing agrees with the model: the last key <= probe.
        for _ in 0..2000 {
            let mut probe = vec![0u8; rng.gen_range(0..8)];
            rng.fill(&mut probe[..]);
            let want = model.range(..=probe.clone()).next_back().unwrap().1;
            let p = &lv.pages[lv.find(&probe)];
            assert_eq!(inner_find_child(p, &probe).1, *want);
        }
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

#[test]
fn set_high_fence_extends_a_leaf_and_refuses_what_does_not_fit() {
    let mut b = vec![0u8; 4096];
    init_leaf(&mut b, 1, 2, b"b", Some(b"m"));
    leaf_insert(&mut b, b"c", b"1").unwrap();
    leaf_insert(&mut b, b"k", b"2").unwrap();
    set_high_fence(&mut b, Some(b"z")).unwrap();
    check_node(&b).unwrap();
    assert_eq!(high_fence(&b), Some(&b"z"[..]));
    assert_eq!(leaf_get(&b, b"k"), Some(&b"2"[..]));
    set_high_fence(&mut b, None).unwrap();
    check_node(&b).unwrap();
    assert!(covers(&b, b"zzzz"));
    let before = b.clone();
    assert_eq!(set_high_fence(&mut b, Some(b"d")), Err(NoRoom));
    assert_eq!(b, before);
}
