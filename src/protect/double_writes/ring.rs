//! Where a shard's batches go in its area, and when a slot may be reused.
//!
//! The area is used as a ring: each call takes the consecutive blocks after
//! the previous one, or starts again at block 1 when they do not fit (a
//! batch never wraps, docs/FORMAT.md). Each call's blocks are one entry,
//! which lives until every one of its blocks is overwritten.
//!
//! The rule that makes reuse safe: an entry's blocks may be overwritten only
//! once each page it holds is durable in place, i.e. an fsync of the page's
//! data file has completed that started after the page's in-place write
//! returned. Until then the copy is the only intact version a torn in-place
//! write would leave. So an entry is
//! - in flight from its reservation until its in-place writes returned
//!   (its marks are unknown): a writer that needs its blocks waits;
//! - then pending until its marks are durable: a writer that needs its
//!   blocks fsyncs those data files itself;
//! - then free.

use std::collections::VecDeque;

/// A data file's "every write completed by now", as the ring sees it.
pub trait Mark: Clone {
    /// True once an fsync that started after the mark was taken completed.
    fn is_durable(&self) -> bool;
}

/// What [`Ring::try_reserve`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Reserve<M> {
    /// The blocks from `start` are the caller's, as entry `ticket`.
    Ready { ticket: u64, start: u32 },
    /// An entry in the way is still in flight: wait for its completion.
    WaitInFlight,
    /// Entries in the way hold pages not yet durable in place: fsync these
    /// data files, then try again.
    SyncFirst(Vec<M>),
}

enum State<M> {
    /// Reserved; its in-place writes have not all returned.
    InFlight,
    /// Every page went in place: reusable once the marks are durable.
    Done(Vec<M>),
}

struct Entry<M> {
    ticket: u64,
    start: u32,
    blocks: u32,
    state: State<M>,
}

impl<M> Entry<M> {
    fn overlaps(&self, start: u32, end: u32) -> bool {
        self.start < end && start < self.start + self.blocks
    }
}

/// One shard's area: blocks `1 ..= area_blocks`.
pub struct Ring<M> {
    area_blocks: u32,
    next: u32,
    next_ticket: u64,
    /// In reservation order.
    entries: VecDeque<Entry<M>>,
    /// TEST-ONLY: see [`test_hooks`].
    #[cfg(test)]
    reuse_too_early: bool,
}

/// TEST-ONLY: a way to break the reuse rule, so a test can show that the
/// crash laboratory catches a slot reused too early.
#[cfg(test)]
pub(crate) mod test_hooks {
    use std::cell::Cell;
    thread_local! {
        /// Rings created on this thread while set take a pending entry's
        /// blocks without waiting for its data files' fsync.
        pub(crate) static REUSE_TOO_EARLY: Cell<bool> = const { Cell::new(false) };
    }
}

impl<M: Mark> Ring<M> {
    pub fn new(area_blocks: u32) -> Ring<M> {
        assert!(area_blocks >= 2, "an area holds at least one batch");
        Ring {
            area_blocks,
            next: 1,
            next_ticket: 1,
            entries: VecDeque::new(),
            #[cfg(test)]
            reuse_too_early: test_hooks::REUSE_TOO_EARLY.get(),
        }
    }

    /// The most blocks one reservation may take.
    pub fn area_blocks(&self) -> u32 {
        self.area_blocks
    }

    /// Takes `blocks` consecutive blocks if every entry in their way is
    /// free; otherwise says what must happen first.
    pub fn try_reserve(&mut self, blocks: u32) -> Reserve<M> {
        assert!(
            (1..=self.area_blocks).contains(&blocks),
            "a reservation of {blocks} blocks in an area of {}",
            self.area_blocks
        );
        let start = if self.next + blocks <= self.area_blocks + 1 {
            self.next
        } else {
            1
        };
        let end = start + blocks;
        let mut pending = Vec::new();
        for e in self.entries.iter().filter(|e| e.overlaps(start, end)) {
            match &e.state {
                State::InFlight => return Reserve::WaitInFlight,
                State::Done(marks) => {
                    pending.extend(marks.iter().filter(|m| !m.is_durable()).cloned())
                }
            }
        }
        #[cfg(test)]
        if self.reuse_too_early {
            pending.clear();
        }
        if !pending.is_empty() {
            return Reserve::SyncFirst(pending);
        }
        self.entries.retain(|e| !e.overlaps(start, end));
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.entries.push_back(Entry {
            ticket,
            start,
            blocks,
            state: State::InFlight,
        });
        self.next = end;
        Reserve::Ready { ticket, start }
    }

    fn entry_mut(&mut self, ticket: u64) -> &mut Entry<M> {
        self.entries
            .iter_mut()
            .find(|e| e.ticket == ticket)
            .expect("an entry lives until its blocks are reserved again")
    }

    /// The in-place writes of entry `ticket` returned: its blocks become
    /// reusable once `marks` are durable. An entry whose pages were never
    /// written in place (its batch failed) gets no marks and is free.
    pub fn complete(&mut self, ticket: u64, marks: Vec<M>) {
        let e = self.entry_mut(ticket);
        assert!(
            matches!(e.state, State::InFlight),
            "entry {ticket} completed twice"
        );
        e.state = State::Done(marks);
    }

    /// Whether an entry lies within the next `window` blocks.
    fn ahead(&self, window: u32) -> impl Fn(&Entry<M>) -> bool {
        let window = window.min(self.area_blocks);
        let (next, area_blocks) = (self.next, self.area_blocks);
        let end = next + window;
        let wrapped = end.saturating_sub(area_blocks + 1);
        move |e: &Entry<M>| {
            e.overlaps(next, end.min(area_blocks + 1))
                || (wrapped > 0 && e.overlaps(1, 1 + wrapped))
        }
    }

    /// Marks not yet durable of the completed entries that the next
    /// `window` blocks' reservations will overwrite (from the next block
    /// on, wrapping at the area's end): what a background fsync should
    /// make durable before a writer needs those blocks.
    pub fn pending_ahead(&self, window: u32) -> Vec<M> {
        let ahead = self.ahead(window);
        self.entries
            .iter()
            .filter(|e| ahead(e))
            .filter_map(|e| match &e.state {
                State::Done(marks) => Some(marks),
                _ => None,
            })
            .flatten()
            .filter(|m| !m.is_durable())
            .cloned()
            .collect()
    }

    /// Entries still in flight.
    pub fn in_flight(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e.state, State::InFlight))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A mark that becomes durable when its test says so.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct TestMark(Rc<Cell<bool>>);
    impl Mark for TestMark {
        fn is_durable(&self) -> bool {
            self.0.get()
        }
    }
    fn mark(durable: bool) -> TestMark {
        TestMark(Rc::new(Cell::new(durable)))
    }

    fn ready(r: Reserve<TestMark>) -> (u64, u32) {
        match r {
            Reserve::Ready { ticket, start } => (ticket, start),
            other => panic!("expected Ready, got {other:?}"),
        }
    }

    #[test]
    fn batches_follow_each_other_and_start_again_at_block_one() {
        let mut ring = Ring::<TestMark>::new(10);
        let (a, sa) = ready(ring.try_reserve(4));
        let (b, sb) = ready(ring.try_reserve(4));
        assert_eq!((sa, sb), (1, 5));
        ring.complete(a, vec![mark(true)]);
        ring.complete(b, vec![mark(true)]);
        // 3 blocks do not fit after block 8 (9, 10 are left): back to 1.
        let (_, sc) = ready(ring.try_reserve(3));
        assert_eq!(sc, 1);
        // 2 fit at 4..5, overwriting the rest of the first entry (free)
        // and the start of the second.
        let (_, sd) = ready(ring.try_reserve(2));
        assert_eq!(sd, 4);
    }

    #[test]
    fn an_entry_in_flight_is_never_overwritten() {
        let mut ring = Ring::<TestMark>::new(8);
        let (a, _) = ready(ring.try_reserve(8));
        assert_eq!(ring.try_reserve(1), Reserve::WaitInFlight);
        assert_eq!(ring.in_flight(), 1);
        ring.complete(a, vec![mark(true)]);
        assert_eq!(ready(ring.try_reserve(1)).1, 1);
    }

    #[test]
    fn a_slot_is_reused_only_after_its_data_file_is_durable() {
        // The "slot reused too early" rule: the in-place write returned,
        // but no fsync of the data file started after it has completed.
        let mut ring = Ring::<TestMark>::new(6);
        let (a, _) = ready(ring.try_reserve(6));
        let data_file = mark(false);
        ring.complete(a, vec![data_file.clone(), mark(true)]);
        match ring.try_reserve(2) {
            Reserve::SyncFirst(marks) => assert_eq!(marks, vec![data_file.clone()]),
            other => panic!("reused before the data fsync: {other:?}"),
        }
        data_file.0.set(true);
        assert_eq!(ready(ring.try_reserve(2)).1, 1);
    }

    #[test]
    fn a_failed_batch_frees_its_blocks() {
        let mut ring = Ring::<TestMark>::new(4);
        let (a, _) = ready(ring.try_reserve(4));
        ring.complete(a, Vec::new());
        assert_eq!(ready(ring.try_reserve(4)).1, 1);
    }

    #[test]
    fn entries_out_of_the_way_do_not_hold_a_reservation() {
        let mut ring = Ring::<TestMark>::new(10);
        let (a, _) = ready(ring.try_reserve(5));
        let (_b, _) = ready(ring.try_reserve(5)); // in flight, at 6..10
        ring.complete(a, vec![mark(true)]);
        // Wraps to 1: only the first entry is in the way.
        assert_eq!(ready(ring.try_reserve(5)).1, 1);
    }

    #[test]
    fn pending_ahead_names_what_the_next_reservations_will_overwrite() {
        let mut ring = Ring::<TestMark>::new(10);
        let (a, _) = ready(ring.try_reserve(3)); // 1..=3
        let (b, _) = ready(ring.try_reserve(3)); // 4..=6
        let (c, _) = ready(ring.try_reserve(3)); // 7..=9, next = 10
        let (ma, mb, mc) = (mark(false), mark(false), mark(false));
        ring.complete(a, vec![ma.clone()]);
        ring.complete(b, vec![mb.clone()]);
        ring.complete(c, vec![mc.clone()]);
        // From block 10: block 10 is empty, then 1..=3 (a) after the wrap.
        assert_eq!(ring.pending_ahead(1), Vec::<TestMark>::new());
        assert_eq!(ring.pending_ahead(3), vec![ma.clone()]);
        assert_eq!(ring.pending_ahead(5), vec![ma.clone(), mb.clone()]);
        ma.0.set(true);
        assert_eq!(ring.pending_ahead(5), vec![mb]);
        assert_eq!(ring.pending_ahead(100).len(), 2, "at most the whole area");
    }

    #[test]
    #[should_panic(expected = "a reservation of 11 blocks")]
    fn a_reservation_larger_than_the_area_is_a_bug() {
        Ring::<TestMark>::new(10).try_reserve(11);
    }
}
