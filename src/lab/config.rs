//! One configuration of a comparison: every engine setting a bench may
//! vary, the engine options it makes for a workload's data, and the
//! settings by name as reports and JSON show them.

use crate::options::Options;
use crate::settings::{
    ChecksumAlgorithm, RequestedCreationSettings, TornPageProtection, WalCompression,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// The least buffer pool a bench runs with, in pages: a smaller
/// `--buffer-pool` is refused, the default raised to it.
pub const MIN_BUFFER_POOL_PAGES: u64 = 256;

/// One configuration: every engine setting a comparison may vary.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BenchConfig {
    pub protection: TornPageProtection,
    pub data_checksums: ChecksumAlgorithm,
    pub page_size: u32,
    pub wal_block_size: u32,
    /// Bytes; `None`: a quarter of the workload's data.
    pub buffer_pool: Option<u64>,
    pub max_wal_size: u64,
    pub checkpoint_timeout: Duration,
    pub synchronous_commit: bool,
    /// A device profile name (`real`: none).
    pub device: String,
    pub wal_compression: WalCompression,
    pub checkpoint_sort: bool,
    pub checkpoint_completion_target: f64,
    /// `bgwriter_lru_maxpages` (0: no background writer).
    pub bgwriter_lru_maxpages: u32,
    /// `double_write_buffer_size` (used under double_writes only).
    pub double_write_buffer_size: u64,
    /// `double_write_eviction_pages` (used under double_writes only).
    pub double_write_eviction_pages: u32,
    /// `double_write_defer_in_place` (used under double_writes only).
    pub double_write_defer_in_place: bool,
    /// `double_write_keep_deferred` (used under double_writes only).
    pub double_write_keep_deferred: bool,
    /// `double_write_deferred_size` (0: 16 times the area; used under
    /// double_writes only).
    pub double_write_deferred_size: u64,
    /// `double_write_flush_after` (used under double_writes only).
    pub double_write_flush_after: u32,
    /// A name that tells apart copies of one configuration (`untorn bench
    /// --aa`: `a` and `b`); shown as the `copy` setting. Changes nothing in
    /// the engine.
    pub copy: Option<String>,
    /// Client threads of this configuration (`untorn bench --clients
    /// 1,4,16,64`: one configuration per count); `None`: the plan's
    /// [`crate::lab::runner::RunSpec::clients`]. Shown as `clients` when set.
    pub clients: Option<usize>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            protection: TornPageProtection::FullPages,
            data_checksums: ChecksumAlgorithm::Crc32c,
            page_size: 8192,
            wal_block_size: 8192,
            buffer_pool: None,
            max_wal_size: 64 << 20,
            checkpoint_timeout: Duration::from_secs(300),
            synchronous_commit: true,
            device: "real".into(),
            wal_compression: WalCompression::Off,
            checkpoint_sort: true,
            checkpoint_completion_target: 0.9,
            bgwriter_lru_maxpages: Options::default().bgwriter_lru_maxpages,
            double_write_buffer_size: Options::default().double_write_buffer_size,
            double_write_eviction_pages: Options::default().double_write_eviction_pages,
            double_write_defer_in_place: Options::default().double_write_defer_in_place,
            double_write_keep_deferred: Options::default().double_write_keep_deferred,
            double_write_deferred_size: Options::default().double_write_deferred_size,
            double_write_flush_after: Options::default().double_write_flush_after,
            copy: None,
            clients: None,
        }
    }
}

impl BenchConfig {
    /// The engine options for a workload of `data_bytes`.
    pub fn options(&self, data_bytes: u64) -> Options {
        let pool = self
            .buffer_pool
            .unwrap_or(data_bytes / 4)
            .max(MIN_BUFFER_POOL_PAGES * self.page_size as u64);
        Options {
            creation: RequestedCreationSettings {
                page_size: Some(self.page_size),
                wal_block_size: Some(self.wal_block_size),
                data_checksums: Some(self.data_checksums),
                torn_page_protection: Some(self.protection),
                ..Default::default()
            },
            buffer_pool_size: pool,
            synchronous_commit: self.synchronous_commit,
            max_wal_size: self.max_wal_size,
            checkpoint_timeout: self.checkpoint_timeout,
            wal_compression: self.wal_compression,
            checkpoint_sort: self.checkpoint_sort,
            checkpoint_completion_target: self.checkpoint_completion_target,
            bgwriter_lru_maxpages: self.bgwriter_lru_maxpages,
            double_write_buffer_size: self.double_write_buffer_size,
            double_write_eviction_pages: self.double_write_eviction_pages,
            double_write_defer_in_place: self.double_write_defer_in_place,
            double_write_keep_deferred: self.double_write_keep_deferred,
            double_write_deferred_size: self.double_write_deferred_size,
            double_write_flush_after: self.double_write_flush_after,
            ..Options::default()
        }
    }

    /// The A/A check (`untorn bench --aa`): this configuration twice, told
    /// apart only by the `copy` setting (`a`, `b`), so the report's ratio
    /// between them measures the instrument, not the engine.
    pub fn aa_pair(&self) -> Vec<BenchConfig> {
        ["a", "b"]
            .map(|copy| BenchConfig {
                copy: Some(copy.into()),
                ..self.clone()
            })
            .to_vec()
    }

    /// Every setting, by name, as the report and the JSON show them.
    pub fn settings(&self, data_bytes: u64) -> BTreeMap<String, String> {
        let o = self.options(data_bytes);
        let mut m = BTreeMap::new();
        m.insert("torn_page_protection".into(), self.protection.to_string());
        m.insert("data_checksums".into(), self.data_checksums.to_string());
        m.insert("page_size".into(), self.page_size.to_string());
        m.insert("wal_block_size".into(), self.wal_block_size.to_string());
        m.insert("buffer_pool_size".into(), o.buffer_pool_size.to_string());
        m.insert("max_wal_size".into(), self.max_wal_size.to_string());
        m.insert(
            "checkpoint_timeout_s".into(),
            format!("{}", self.checkpoint_timeout.as_secs_f64()),
        );
        m.insert(
            "synchronous_commit".into(),
            on_off(self.synchronous_commit).into(),
        );
        m.insert("device".into(), self.device.clone());
        if let Some(n) = self.clients {
            m.insert("clients".into(), n.to_string());
        }
        m.insert("wal_compression".into(), self.wal_compression.to_string());
        m.insert(
            "checkpoint_sort".into(),
            on_off(self.checkpoint_sort).into(),
        );
        m.insert(
            "checkpoint_completion_target".into(),
            self.checkpoint_completion_target.to_string(),
        );
        m.insert(
            "bgwriter_lru_maxpages".into(),
            o.bgwriter_lru_maxpages.to_string(),
        );
        m.insert(
            "double_write_buffer_size".into(),
            o.double_write_buffer_size.to_string(),
        );
        m.insert(
            "double_write_eviction_pages".into(),
            o.double_write_eviction_pages.to_string(),
        );
        m.insert(
            "double_write_defer_in_place".into(),
            on_off(o.double_write_defer_in_place).into(),
        );
        m.insert(
            "double_write_keep_deferred".into(),
            on_off(o.double_write_keep_deferred).into(),
        );
        m.insert(
            "double_write_deferred_size".into(),
            crate::protect::double_writes::settings::deferred_bytes(&o).to_string(),
        );
        m.insert(
            "double_write_flush_after".into(),
            o.double_write_flush_after.to_string(),
        );
        if let Some(copy) = &self.copy {
            m.insert("copy".into(), copy.clone());
        }
        m
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}
