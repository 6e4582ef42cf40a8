//! A session's COPY ... FROM STDIN in progress: fed by `copy_data`, ended
//! by `copy_done` or `copy_fail` (the text format: copy.rs).

use super::copy::{fields, lines, CopyState};
use super::engine_err;
use super::exec::{self, Sink};
use super::session::{Session, State};
use super::types::{codes, Outcome, SqlError};

impl Session {
    pub fn copy_data(&mut self, data: &[u8]) -> Result<(), SqlError> {
        let Some(mut c) = self.copy.take() else {
            return Ok(());
        };
        match self.copy_lines(&mut c, data) {
            Ok(()) => {
                self.copy = Some(c);
                Ok(())
            }
            Err(e) => Err(self.abandon_copy(c, e)),
        }
    }

    fn copy_lines(&mut self, c: &mut CopyState, data: &[u8]) -> Result<(), SqlError> {
        let eng = self.engine.clone();
        for line in lines(&mut c.buf, data) {
            if c.ended {
                continue;
            }
            if line == b"\\." {
                c.ended = true;
                continue;
            }
            let row = exec::build_row(&c.meta, &c.targets, fields(&line, c.targets.len())?)?;
            let tx = match &mut self.state {
                State::Block(tx) => tx.get_or_insert_with(|| eng.db.begin_shared()),
                _ => c.tx.get_or_insert_with(|| eng.db.begin_shared()),
            };
            exec::insert_row(&mut Sink::Tx(tx), &c.meta, &row)?;
            c.count += 1;
        }
        // The table found at COPY's start may have changed before its
        // first row was written (`session_ddl::Current`).
        self.current(&eng.catalog, &c.meta.def.name, &c.meta)
            .check()
    }

    fn abandon_copy(&mut self, c: CopyState, e: SqlError) -> SqlError {
        if let Some(t) = c.tx {
            t.abort();
        }
        self.fail(&e);
        drop(c.meta);
        self.let_definitions_go();
        e
    }

    pub fn copy_done(&mut self) -> Result<Outcome, SqlError> {
        let Some(mut c) = self.copy.take() else {
            return Err(SqlError::new(
                codes::PROTOCOL_VIOLATION,
                "no COPY in progress",
            ));
        };
        let r = (|| {
            if !c.buf.is_empty() && !c.ended {
                let rest = std::mem::take(&mut c.buf);
                let mut with_nl = rest;
                with_nl.push(b'\n');
                self.copy_lines(&mut c, &with_nl)?;
            }
            if let Some(t) = c.tx.take() {
                t.commit().map_err(engine_err)?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                let tag = format!("COPY {}", c.count);
                drop(c);
                self.let_definitions_go();
                Ok(Outcome::Command { tag })
            }
            Err(e) => Err(self.abandon_copy(c, e)),
        }
    }

    pub fn copy_fail(&mut self, message: &str) -> SqlError {
        let e = SqlError::new("57014", format!("COPY from stdin failed: {message}"));
        match self.copy.take() {
            Some(c) => self.abandon_copy(c, e),
            None => e,
        }
    }
}
