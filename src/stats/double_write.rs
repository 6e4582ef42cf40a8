//! The double-write view: a row per writer (checkpointer, background
//! writer, clients), read from the shards' counters
//! (`crate::protect::double_writes::DoubleWriteStats`).

use super::{ratio, Figure, Op};
use crate::protect::double_writes::area::Shard;
use crate::protect::double_writes::{DoubleWriteStats, ShardStats};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

view! {
    /// One writer's row of the double-write view: what went through its
    /// shard of the area (`torn_page_protection = double_writes`).
    DoubleWriteFigures {
        /// Page images written to the area (header blocks not counted).
        pages: u64,
        /// Batches, each with its header block.
        batches: u64,
        /// Write calls, each carrying one or more batches.
        writes: u64,
        /// fsyncs of the shard file, each shared by the writes it covered.
        fsyncs: u64,
        /// Pages given a durable double-write copy per fsync that made
        /// them durable: `(pages + written_back + deferred) / (fsyncs +
        /// deferred_fsyncs + manifests)` (a write-back's pages are covered
        /// by one fsync of `dw/deferred`, a checkpoint's deferred pages by
        /// the one fsync of the manifest written into it; `deferred` counts
        /// only in a row with manifests). Recomputed, never summed.
        pages_per_fsync: f64,
        /// Data-file fsyncs a writer ran itself to reuse slots whose pages
        /// were not yet durable in place.
        slot_syncs: u64,
        /// Times a writer waited for a batch in flight to free its slots.
        slot_waits: u64,
        /// Data-file fsyncs the background syncer ran ahead of the writers
        /// (`double_write_sync_ahead`), so that they did not wait.
        syncs_ahead: u64,
        /// Pages this writer stored in `dw/deferred` instead of writing
        /// them (`double_write_defer_in_place`).
        deferred: u64,
        /// Deferred pages written back in place (a checkpoint's: the
        /// checkpointer's row).
        written_back: u64,
        /// fsyncs of `dw/deferred` before write-backs: its slots became the
        /// pages' double-write copies, so they skip the area.
        deferred_fsyncs: u64,
        /// Manifests naming `dw/deferred`'s slots that a checkpoint made
        /// durable (checkpointer row), each written into `dw/deferred` and
        /// made durable with its slots by one fsync.
        manifests: u64,
        /// Deferred copies never written in place: a newer copy replaced
        /// them, or the page went in place from a newer version.
        obsolete: u64,
        /// Pages this writer's reads found in `dw/deferred` instead of
        /// their data file.
        reads: u64,
        /// Manifest and write-back list pages written into `dw/deferred`
        /// (with `batches`' header blocks, what double writes write
        /// besides page images).
        deferred_meta_pages: u64,
    }
}

view! {
    /// Double writes by writer, a row per shard of the area: the
    /// checkpointer, the background writer, and clients writing dirty
    /// victims (recovery's and tools' evictions count there too).
    DoubleWriteView {
        checkpointer: DoubleWriteFigures,
        background_writer: DoubleWriteFigures,
        client: DoubleWriteFigures,
    }
}

impl DoubleWriteFigures {
    fn from_shard(s: &ShardStats) -> DoubleWriteFigures {
        let l = |a: &AtomicU64| a.load(Relaxed);
        DoubleWriteFigures {
            pages: l(&s.pages),
            batches: l(&s.batches),
            writes: l(&s.writes),
            fsyncs: l(&s.fsyncs),
            pages_per_fsync: 0.0,
            slot_syncs: l(&s.slot_syncs),
            slot_waits: l(&s.slot_waits),
            syncs_ahead: l(&s.syncs_ahead),
            deferred: l(&s.deferred),
            written_back: l(&s.written_back),
            deferred_fsyncs: l(&s.deferred_fsyncs),
            manifests: l(&s.manifests),
            obsolete: l(&s.obsolete),
            reads: l(&s.reads),
            deferred_meta_pages: l(&s.deferred_meta_pages),
        }
    }

    fn derive(mut self) -> DoubleWriteFigures {
        // Deferred pages become durable copies by the manifests' fsyncs
        // (one each, of dw/deferred): only a row that wrote them counts
        // its deferred pages.
        let by_manifest = if self.manifests > 0 { self.deferred } else { 0 };
        self.pages_per_fsync = ratio(
            self.pages + self.written_back + by_manifest,
            self.fsyncs + self.deferred_fsyncs + self.manifests,
        );
        self
    }
}

impl DoubleWriteView {
    pub(super) fn collect(s: &DoubleWriteStats) -> DoubleWriteView {
        let row = |shard: Shard| DoubleWriteFigures::from_shard(s.shard(shard.number()));
        DoubleWriteView {
            checkpointer: row(Shard::Checkpointer),
            background_writer: row(Shard::BackgroundWriter),
            client: row(Shard::ClientEvictions),
        }
        .with_ratios()
    }

    /// The rows by writer name, in shard order.
    pub fn rows(&self) -> [(&'static str, &DoubleWriteFigures); 3] {
        [
            ("checkpointer", &self.checkpointer),
            ("background_writer", &self.background_writer),
            ("client", &self.client),
        ]
    }

    /// Every writer's figures together.
    pub fn total(&self) -> DoubleWriteFigures {
        self.checkpointer
            .plus(&self.background_writer)
            .plus(&self.client)
            .derive()
    }

    /// With each row's ratios recomputed from its counts (after `plus`,
    /// which sums them).
    pub fn with_ratios(self) -> DoubleWriteView {
        DoubleWriteView {
            checkpointer: self.checkpointer.derive(),
            background_writer: self.background_writer.derive(),
            client: self.client.derive(),
        }
    }
}
