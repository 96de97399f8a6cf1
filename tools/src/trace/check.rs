//! Whether a trace's counts and indices are consistent: what [`Trace::load`] requires of a
//! file, so that no later operation (listing, comparing, indexing) is given numbers that
//! contradict each other — a crafted `skipped` near `2^64` made comparing skip every step.

use super::Trace;
use crate::error::{Error, Result};

impl Trace {
    /// Checks what a recorded trace always satisfies: `skipped + steps.len()` is countable; the
    /// steps are numbered `skipped, skipped + 1, ...`; each step returned after it started and
    /// no later than the last step started (`index < end <= total_steps`); calls nest (a step
    /// that started inside another returned no later than it, one level deeper, and a step
    /// inside no kept step is at most `skipped` deep); and the written arguments of a step are
    /// distinct argument indices in increasing order. The error names the step and the field.
    pub fn check(&self) -> Result<()> {
        let total = self.skipped.checked_add(self.steps.len()).ok_or_else(|| {
            Error::value(format!(
                "skipped = {} with {} kept steps: more steps than can be counted",
                self.skipped,
                self.steps.len()
            ))
        })?;
        // The kept steps enclosing the current one, innermost last: (end, depth).
        let mut open: Vec<(usize, usize)> = Vec::new();
        for (pos, s) in self.steps.iter().enumerate() {
            let bad = |field: &str, what: String| {
                Err(Error::value(format!("step at position {pos} (index {}), field {field}: {what}", s.index)))
            };
            if s.index != self.skipped + pos {
                return bad(
                    "index",
                    format!("expected {} (skipped = {} plus its position)", self.skipped + pos, self.skipped),
                );
            }
            if s.end <= s.index || s.end > total {
                return bad(
                    "end",
                    format!("{} is not after the step's start and at most the {total} steps made", s.end),
                );
            }
            while open.last().is_some_and(|&(end, _)| end <= s.index) {
                open.pop();
            }
            match open.last() {
                Some(&(end, depth)) => {
                    if s.end > end {
                        return bad("end", format!("{} is after the end ({end}) of the call enclosing it", s.end));
                    }
                    if s.depth != depth + 1 {
                        return bad("depth", format!("{}, but the call enclosing it is at depth {depth}", s.depth));
                    }
                }
                None if s.depth > self.skipped => {
                    return bad(
                        "depth",
                        format!("{}, but no kept call encloses it and only {} were dropped", s.depth, self.skipped),
                    );
                }
                None => {}
            }
            open.push((s.end, s.depth));
            if let Some(v) = &s.values {
                let mut last = None;
                for (i, _) in &v.outputs {
                    if *i >= v.args.len() || last.is_some_and(|l| *i <= l) {
                        return bad(
                            "outputs",
                            format!(
                                "argument index {i}: expected increasing indices below the {} arguments",
                                v.args.len()
                            ),
                        );
                    }
                    last = Some(*i);
                }
            }
        }
        Ok(())
    }
}
