//! Progress of a long command on stderr. On a terminal one line is
//! rewritten in place; in a log (stderr not a terminal: CI, nohup) a
//! whole line every few seconds and at each step's end, never a flood of
//! `\r` rewrites (nor, as indicatif does there, nothing at all).

use indicatif::ProgressBar;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often a log gets a progress line.
const EVERY: Duration = Duration::from_secs(5);

pub struct Lines {
    terminal: bool,
    last: Instant,
}

impl Lines {
    pub fn new() -> Lines {
        Lines {
            terminal: std::io::stderr().is_terminal(),
            last: Instant::now(),
        }
    }

    /// Shows `line`: rewritten in place on a terminal; in a log printed
    /// whole if `step_done` or a few seconds passed since the last.
    pub fn show(&mut self, line: &str, step_done: bool) {
        if self.terminal {
            eprint!("\r{line}   ");
        } else {
            self.log(step_done, || line.to_string());
        }
    }

    /// Ends a terminal's rewritten line.
    pub fn end(&self) {
        if self.terminal {
            eprintln!();
        }
    }

    /// In a log only (a terminal has `bar`): `bar`'s state as a line, as
    /// [`Lines::show`] times it; `unit` names its count (none: a spinner).
    pub fn log_bar(&mut self, bar: &ProgressBar, unit: Option<&str>, step_done: bool) {
        self.log(step_done, || {
            let secs = bar.elapsed().as_secs();
            let clock = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
            match (unit, bar.length()) {
                (Some(unit), Some(len)) => {
                    format!("{clock} {}/{len} {unit}  {}", bar.position(), bar.message())
                }
                _ => format!("{clock} {}", bar.message()),
            }
        });
    }

    fn log(&mut self, step_done: bool, line: impl FnOnce() -> String) {
        if !self.terminal && (step_done || self.last.elapsed() >= EVERY) {
            eprintln!("{}", line());
            self.last = Instant::now();
        }
    }
}
