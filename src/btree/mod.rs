//! The clustered B+tree: one per table, keys and rows as bytes.
//!
//! - [`key_order`]: the order of keys, compared without a call per key;
//! - [`node`]: the on-page format of nodes and the pure changes on them;
//! - [`node_split`]: splitting a node and moving its high fence (pure too);
//! - [`node_check`]: validation of a node read from disk;
//! - [`meta`]: the meta page (root, height, allocation, free blocks);
//! - [`tree`]: descents with latch coupling, point reads and scans;
//! - [`smo`]: structure changes (create, split), each its own atomic,
//!   self-contained WAL record of full page images;
//! - [`ops`]: row changes to one leaf, as a commit record logs them.
//!
//! Latching rule (stated once, here): top-down only. Readers couple shared
//! latches from the root down; structure changes hold the tree's SMO mutex
//! and take exclusive latches from the meta page down; commits latch only
//! leaves, in page order, and nothing else. No latch is held across a WAL
//! flush or another page's disk read.

pub mod key_order;
pub mod meta;
pub mod node;
pub mod node_check;
pub mod node_split;
pub mod ops;
pub mod smo;
pub mod tree;

pub use tree::{validate_page, Tree};
