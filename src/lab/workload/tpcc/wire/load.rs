//! The load over the wire: the rows of [`crate::lab::workload::tpcc::load`]
//! (so the same values as the embedded load) sent by `COPY t FROM STDIN`
//! in text format (MariaDB, which has no COPY: the same text as
//! multi-row INSERTs, [`Conn::copy_in`]). Three generator threads (items
//! and stock; customers and history; orders) cut the rows into COPYs of a
//! few thousand rows, and `connections` clients send them, each COPY its
//! own transaction, so warehouses load in parallel.

use super::dialect::create;
use super::schema::{self, CopyText, SCHEMA, TABLES};
use super::{Conn, Result, Target, WireError};
use crate::lab::workload::tpcc::{load as rows, Tpcc};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

/// Rows per COPY (a few MB of text at most).
const CHUNK: u64 = 5_000;

/// One COPY to send.
struct Job {
    table: &'static str,
    text: CopyText,
}

/// Sends jobs until the clients are gone or one failed.
struct Out<'a> {
    tx: SyncSender<Job>,
    failed: &'a AtomicBool,
}

impl Out<'_> {
    /// False when the load stops.
    fn send(&self, table: &'static str, text: CopyText) -> bool {
        if text.rows == 0 {
            return true;
        }
        !self.failed.load(Relaxed) && self.tx.send(Job { table, text }).is_ok()
    }

    /// Sends `rows` encoded by `put`, CHUNK rows per COPY.
    fn chunks<R>(
        &self,
        table: &'static str,
        rows: impl Iterator<Item = R>,
        mut put: impl FnMut(&mut CopyText, R),
    ) -> bool {
        let mut text = CopyText::new();
        for row in rows {
            put(&mut text, row);
            if text.rows == CHUNK && !self.send(table, std::mem::take(&mut text)) {
                return false;
            }
        }
        self.send(table, text)
    }
}

/// Rows loaded per table, in [`TABLES`] order.
pub type Loaded = Vec<(&'static str, u64)>;

/// Creates the tables (dropping them first with `drop`) and loads them.
pub fn load(target: &Target, t: &Tpcc, connections: usize, drop_first: bool) -> Result<Loaded> {
    let mut client = target.connect()?;
    if drop_first {
        for table in TABLES {
            client.simple(&format!("DROP TABLE IF EXISTS {table}"))?;
        }
    }
    for sql in SCHEMA {
        client.simple(&create(sql, client.dialect()))?;
    }
    let mut clients = vec![client];
    for _ in 1..connections.max(1) {
        clients.push(target.connect()?);
    }
    let failed = AtomicBool::new(false);
    let (tx, rx) = sync_channel::<Job>(clients.len() * 2);
    let rx = Arc::new(Mutex::new(rx));
    std::thread::scope(|s| {
        let senders: Vec<_> = clients
            .into_iter()
            .map(|c| {
                let (rx, failed) = (Arc::clone(&rx), &failed);
                s.spawn(move || send_jobs(c, &rx, failed))
            })
            .collect();
        drop(rx);
        let generators = [
            s.spawn({
                let out = Out {
                    tx: tx.clone(),
                    failed: &failed,
                };
                move || items_and_stock(t, &out)
            }),
            s.spawn({
                let out = Out {
                    tx: tx.clone(),
                    failed: &failed,
                };
                move || customers_and_history(t, &out)
            }),
            s.spawn({
                let out = Out {
                    tx,
                    failed: &failed,
                };
                move || orders(t, &out)
            }),
        ];
        for g in generators {
            g.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        let mut loaded: Loaded = TABLES.iter().map(|&t| (t, 0)).collect();
        let mut first_error = None;
        for h in senders {
            match h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                Ok(counts) => {
                    for (sum, n) in loaded.iter_mut().zip(counts) {
                        sum.1 += n;
                    }
                }
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        first_error.map_or(Ok(loaded), Err)
    })
}

/// One client's COPYs, until the generators are done; rows per table.
fn send_jobs(mut client: Conn, rx: &Mutex<Receiver<Job>>, failed: &AtomicBool) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; TABLES.len()];
    loop {
        let job = rx
            .lock()
            .map_err(|_| WireError::Invalid("poisoned".into()))?
            .recv();
        let Ok(job) = job else { return Ok(counts) };
        if failed.load(Relaxed) {
            return Ok(counts);
        }
        if let Err(e) = client.copy_in(job.table, &job.text) {
            failed.store(true, Relaxed);
            return Err(e);
        }
        let at = TABLES.iter().position(|&t| t == job.table).unwrap_or(0);
        counts[at] += job.text.rows;
    }
}

fn items_and_stock(t: &Tpcc, out: &Out<'_>) {
    let _ = out.chunks("item", rows::items(t), |c, (i, row)| {
        schema::item(c, i, &row)
    }) && {
        let (warehouses, districts) = rows::warehouses_and_districts(t);
        out.chunks("warehouse", warehouses.iter(), |c, (w, row)| {
            schema::warehouse(c, *w, row)
        }) && out.chunks("district", districts.iter(), |c, (w, d, row)| {
            schema::district(c, *w, *d, row)
        })
    } && out.chunks("stock", rows::stock(t), |c, (w, i, row)| {
        schema::stock(c, w, i, &row)
    });
}

fn customers_and_history(t: &Tpcc, out: &Out<'_>) {
    let _ = out.chunks("customer", rows::customers(t), |c, (w, d, id, row)| {
        schema::customer(c, w, d, id, &row)
    }) && out.chunks("history", rows::history(t), |c, (_, row)| {
        schema::history(c, &row)
    });
}

fn orders(t: &Tpcc, out: &Out<'_>) {
    for district in rows::orders(t) {
        let [o, l, n] = schema::orders(&district);
        // A district's order lines (about 30,000) go as several COPYs: each
        // COPY is one transaction, and untorn serve bounds a transaction's
        // write set (10,000 rows).
        let lines_sent = l
            .split(CHUNK)
            .into_iter()
            .all(|c| out.send("order_line", c));
        if !(out.send("orders", o) && lines_sent && out.send("new_order", n)) {
            return;
        }
    }
}
