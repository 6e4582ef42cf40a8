//! From text to planned statements: a Query message's statements, a
//! Parse message's one, and a prepared statement planned again after DDL.
//!
//! Rules: text is split and parsed within the server's parse budget
//! (`budget`), whose units a message holds until its syntax trees are
//! dropped; a prepared statement keeps its text and plan, not its tree,
//! so what it holds is not parse memory (it is parsed again, within the
//! budget, if DDL makes it plan again).

use super::parse::{self, Planned, Prepared};
use super::plan::Plan;
use super::script::{self, PendingScript, Script};
use super::session::{failed_block, Session, State};
use super::types::{codes, Outcome, SqlError, SqlType};
use sqlparser::ast::Statement;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

impl Session {
    /// `sql` split into statements within the limits and the parse
    /// budget; a wait for the budget is a statement's wait (cancel,
    /// statement_timeout).
    fn split(&self, sql: &str) -> Result<Script, SqlError> {
        let watch = self.interrupt.watch(self.timeout());
        let engine = &self.engine;
        script::split(sql, engine.limits(), &engine.budget, &watch)
    }

    pub fn prepare(
        &mut self,
        sql: &str,
        declared: &[Option<SqlType>],
    ) -> Result<Arc<Prepared>, SqlError> {
        // An error in Parse fails an open block, as any error does.
        let (pieces, _permit) = if parse::is_checkpoint(sql) {
            (Vec::new(), None)
        } else {
            let s = self.split(sql).inspect_err(|e| self.fail(e))?;
            (s.pieces, Some(s.permit))
        };
        if pieces.len() > 1 {
            return Err(SqlError::new(
                codes::SYNTAX_ERROR,
                "cannot insert multiple commands into a prepared statement",
            ));
        }
        let limits = self.engine.limits();
        let stmt = match pieces.into_iter().next() {
            Some(p) => Some(p.parse(limits).inspect_err(|e| self.fail(e))?),
            None => None,
        };
        if matches!(self.state, State::Failed)
            && !matches!(
                stmt,
                Some(Statement::Commit { .. } | Statement::Rollback { .. })
            )
        {
            return Err(failed_block());
        }
        let planned = self.plan(sql, stmt.as_ref(), declared);
        Ok(Arc::new(planned.inspect_err(|e| self.fail(e))?))
    }

    /// `stmt` planned again from its text, after DDL changed the catalog.
    pub(super) fn replan(&self, stmt: &Prepared) -> Result<Prepared, SqlError> {
        let Script {
            pieces,
            permit: _permit,
        } = self.split(&stmt.sql)?;
        let limits = self.engine.limits();
        let parsed = pieces
            .into_iter()
            .next()
            .map(|p| p.parse(limits))
            .transpose()?;
        self.plan(&stmt.sql, parsed.as_ref(), &stmt.declared)
    }

    pub(super) fn plan(
        &self,
        sql: &str,
        stmt: Option<&Statement>,
        declared: &[Option<SqlType>],
    ) -> Result<Prepared, SqlError> {
        let catalog = &self.engine.catalog;
        let version = catalog.version.load(SeqCst);
        let planned = match stmt {
            Some(s) => parse::plan(self, s, declared, sql, self.engine.limits())?,
            None if parse::is_checkpoint(sql) => Planned {
                plan: Plan::Checkpoint,
                params: Vec::new(),
                columns: Vec::new(),
            },
            None => Planned {
                plan: Plan::Noop("EMPTY"),
                params: Vec::new(),
                columns: Vec::new(),
            },
        };
        Ok(Prepared {
            sql: sql.to_string(),
            declared: declared.to_vec(),
            planned,
            version,
        })
    }

    /// Runs a Query message's statements; a SELECT's rows are all read
    /// (`collect`). The server streams them instead (`query_start`).
    pub fn simple_query(&mut self, sql: &str) -> Vec<Result<Outcome, SqlError>> {
        self.query_start(sql);
        let mut out = Vec::new();
        while let Some(r) = self.query_next() {
            let r = r.and_then(|o| self.collect(o));
            let stop = r.is_err();
            out.push(r);
            if stop {
                // An error ends the message; what follows is the end of
                // its implicit transaction.
                self.end_script_after_error(&mut out);
                break;
            }
        }
        out
    }

    /// Takes a Query message: its statements are parsed now, and run one
    /// at a time by `query_next`, so that one's rows can be sent before
    /// the next runs. The whole message is parsed before any of it runs,
    /// as in PostgreSQL: a syntax error anywhere runs none of it. Its
    /// parse budget is held until its trees are dropped, at its end.
    pub fn query_start(&mut self, sql: &str) {
        self.end_script();
        if parse::is_checkpoint(sql) {
            self.script = Some(PendingScript {
                stmts: VecDeque::new(),
                checkpoint: Some(sql.to_string()),
                batch: false,
                error: None,
                _permit: None,
            });
            return;
        }
        let limits = self.engine.limits().clone();
        let mut held = None;
        let stmts = self.split(sql).and_then(|script| {
            held = Some(script.permit);
            let single = script.pieces.len() == 1;
            script
                .pieces
                .into_iter()
                .map(|p| {
                    let text = if single {
                        sql.trim().to_string()
                    } else {
                        p.text.clone()
                    };
                    p.parse(&limits).map(|s| (text, s))
                })
                .collect::<Result<VecDeque<_>, _>>()
        });
        let (stmts, error) = match stmts {
            Ok(s) => (s, None),
            Err(e) => {
                held = None;
                self.fail(&e);
                (VecDeque::new(), Some(e))
            }
        };
        // Several statements are one implicit transaction, as in
        // PostgreSQL (`implicit`); with a COPY among them each is its own.
        let batch = stmts.len() > 1
            && !stmts
                .iter()
                .any(|(_, s)| matches!(s, Statement::Copy { .. }));
        self.script = Some(PendingScript {
            stmts,
            checkpoint: None,
            batch,
            error,
            _permit: held,
        });
    }

    /// The Query message's next statement run (a SELECT opened as a
    /// cursor, to be fetched before the next call), or, at its end, an
    /// error of its implicit transaction's commit; `None` once done.
    pub fn query_next(&mut self) -> Option<Result<Outcome, SqlError>> {
        let script = self.script.as_mut()?;
        if let Some(e) = script.error.take() {
            self.script = None;
            return Some(Err(e));
        }
        if let Some(sql) = script.checkpoint.take() {
            self.script = None;
            let r = self
                .plan(&sql, None, &[])
                .and_then(|p| self.start(&Arc::new(p), &[]));
            return Some(r);
        }
        let batch = script.batch;
        let Some((text, s)) = script.stmts.pop_front() else {
            self.script = None;
            return match batch {
                true => self.sync().err().map(Err),
                false => None,
            };
        };
        let r = if matches!(self.state, State::Failed)
            && !matches!(s, Statement::Commit { .. } | Statement::Rollback { .. })
        {
            Err(failed_block())
        } else {
            self.plan(&text, Some(&s), &[]).and_then(|p| {
                let p = Arc::new(p);
                if batch {
                    self.start_in_batch(&p, &[])
                } else {
                    self.start(&p, &[])
                }
            })
        };
        if let Err(e) = &r {
            self.fail(e);
        }
        if matches!(r, Err(_) | Ok(Outcome::CopyIn { .. })) {
            // The message ends here; only its implicit transaction's end
            // is left for the next call.
            if let Some(script) = self.script.as_mut() {
                script.stmts.clear();
            }
        }
        Some(r)
    }

    /// Ends the Query message in progress, if any (an error ended it, or
    /// its client stopped reading): its implicit transaction ends as at
    /// the message's end (rolled back, after an error).
    pub(super) fn end_script(&mut self) {
        if let Some(script) = self.script.take() {
            if script.batch {
                let _ = self.sync();
            }
        }
    }

    /// `end_script` after an error in `simple_query`, its commit error
    /// (if any) reported.
    fn end_script_after_error(&mut self, out: &mut Vec<Result<Outcome, SqlError>>) {
        if let Some(script) = self.script.as_mut() {
            script.stmts.clear();
        }
        while let Some(r) = self.query_next() {
            out.push(r);
        }
    }
}
