//! Tests of splits and fence changes: a middle split makes room for the
//! change that caused it, rows of sibling leaves and inner nodes split again
//! and again keep every entry and chain their fences, and a widened high
//! fence keeps the entries.

use super::*;
use crate::btree::node::tests::{inner_entries, leaf, leaf_entries, val, SIZES};
use crate::btree::node::*;
use crate::btree::node_check::check_node;
use crate::page::read_header;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

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
