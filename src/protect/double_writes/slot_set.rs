//! A set of `dw/deferred`'s slots, one bit per slot.
//!
//! Why not a `HashSet` or a `BTreeSet`: slots are dense from zero, and on
//! every page a client evicts the deferred file asks whether a manifest
//! names the slot its older copy leaves, and takes the lowest free slot.
//! Hashing and tree walks were a visible share of that path's CPU (the
//! write_only profile at ten times the default data); a bit is one load.

/// Slots as bits of 64-bit words, with a lower bound on the lowest member
/// so that taking the lowest does not rescan the empty words below it.
#[derive(Clone, Debug, Default)]
pub struct SlotSet {
    words: Vec<u64>,
    len: usize,
    /// No member lies below this slot.
    lowest_from: u32,
}

impl SlotSet {
    /// Adds `slot`; false if it was there.
    pub fn insert(&mut self, slot: u32) -> bool {
        let (w, bit) = Self::place(slot);
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & bit != 0;
        self.words[w] |= bit;
        if !was {
            self.len += 1;
            self.lowest_from = self.lowest_from.min(slot);
        }
        !was
    }

    pub fn contains(&self, slot: u32) -> bool {
        let (w, bit) = Self::place(slot);
        self.words.get(w).is_some_and(|word| word & bit != 0)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes and returns the lowest member.
    pub fn pop_lowest(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let first = self.lowest_from as usize / 64;
        let (w, word) = self.words[first..]
            .iter()
            .enumerate()
            .find(|(_, word)| **word != 0)
            .map(|(i, word)| (first + i, *word))
            .expect("len counts a member");
        let slot = (w * 64) as u32 + word.trailing_zeros();
        self.words[w] &= !(1 << (slot % 64));
        self.len -= 1;
        self.lowest_from = slot;
        Some(slot)
    }

    /// Adds every slot of `other`.
    pub fn extend(&mut self, other: &SlotSet) {
        for slot in other.iter() {
            self.insert(slot);
        }
    }

    /// The members, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            (0..64)
                .filter(move |bit| word >> bit & 1 == 1)
                .map(move |bit| (w * 64) as u32 + bit)
        })
    }

    fn place(slot: u32) -> (usize, u64) {
        (slot as usize / 64, 1 << (slot % 64))
    }
}

impl FromIterator<u32> for SlotSet {
    fn from_iter<I: IntoIterator<Item = u32>>(slots: I) -> SlotSet {
        let mut set = SlotSet::default();
        for slot in slots {
            set.insert(slot);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32),
        PopLowest,
        Extend(Vec<u32>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..700).prop_map(Op::Insert),
            3 => Just(Op::PopLowest),
            1 => proptest::collection::vec(0u32..700, 0..20).prop_map(Op::Extend),
        ]
    }

    proptest! {
        /// Against a BTreeSet: the same members, the same lowest taken.
        #[test]
        fn behaves_as_an_ordered_set(ops in proptest::collection::vec(op(), 0..300)) {
            let mut set = SlotSet::default();
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(s) => prop_assert_eq!(set.insert(s), model.insert(s)),
                    Op::PopLowest => prop_assert_eq!(set.pop_lowest(), model.pop_first()),
                    Op::Extend(slots) => {
                        set.extend(&slots.iter().copied().collect());
                        model.extend(slots);
                    }
                }
                prop_assert_eq!(set.len(), model.len());
                prop_assert_eq!(set.is_empty(), model.is_empty());
            }
            prop_assert!(set.iter().eq(model.iter().copied()));
            for s in 0..760 {
                prop_assert_eq!(set.contains(s), model.contains(&s));
            }
        }
    }
}
