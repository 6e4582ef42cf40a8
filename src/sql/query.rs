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
use super::script::{self, Script};
use super::session::{failed_block, Session, State};
use super::types::{codes, Outcome, SqlError, SqlType};
use sqlparser::ast::Statement;
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
            Some(s) => parse::plan(catalog, s, declared, sql, self.engine.limits())?,
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

    pub fn simple_query(&mut self, sql: &str) -> Vec<Result<Outcome, SqlError>> {
        if parse::is_checkpoint(sql) {
            let r = self
                .plan(sql, None, &[])
                .and_then(|p| self.execute(&p, &[]));
            return vec![r];
        }
        // The whole message is parsed before any of it runs, as in
        // PostgreSQL: a syntax error anywhere runs none of it. Its budget
        // is held until its trees are dropped, at the end.
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
                .collect::<Result<Vec<_>, _>>()
        });
        let stmts = match stmts {
            Ok(s) => s,
            Err(e) => {
                drop(held);
                self.fail(&e);
                return vec![Err(e)];
            }
        };
        // Several statements are one implicit transaction, as in
        // PostgreSQL (`implicit`); with a COPY among them each is its own.
        let batch = stmts.len() > 1
            && !stmts
                .iter()
                .any(|(_, s)| matches!(s, Statement::Copy { .. }));
        let mut out = Vec::new();
        for (text, s) in stmts {
            let r = if matches!(self.state, State::Failed)
                && !matches!(s, Statement::Commit { .. } | Statement::Rollback { .. })
            {
                Err(failed_block())
            } else {
                self.plan(&text, Some(&s), &[]).and_then(|p| {
                    if batch {
                        self.execute_in_batch(&p, &[])
                    } else {
                        self.execute(&p, &[])
                    }
                })
            };
            let stop = matches!(r, Err(_) | Ok(Outcome::CopyIn { .. }));
            if let Err(e) = &r {
                self.fail(e);
            }
            out.push(r);
            if stop {
                break;
            }
        }
        if batch {
            if let Err(e) = self.sync() {
                out.push(Err(e));
            }
        }
        drop(held);
        out
    }
}
