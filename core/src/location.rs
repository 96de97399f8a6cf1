//! Source locations attached to instructions (as in BEF and MLIR).

use std::fmt;

/// Where an instruction came from, printed in MLIR's syntax (`loc("model.py":4:2)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    /// A file, line and column.
    File {
        /// The file name.
        file: String,
        /// The line (1-based).
        line: u32,
        /// The column (1-based).
        col: u32,
    },
    /// A name, e.g. of the operator the instruction lowers.
    Name(String),
    /// A call site: `callee` inlined at `caller`.
    CallSite {
        /// Where the code was written.
        callee: Box<Location>,
        /// Where it was called from.
        caller: Box<Location>,
    },
    /// Several locations fused into one instruction.
    Fused(Vec<Location>),
}

/// Writes `s` as a double-quoted string with backslash escapes.
pub fn write_quoted(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            '\r' => f.write_str("\\r")?,
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(f, "\\u{{{:x}}}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl Location {
    fn write_inner(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File { file, line, col } => {
                write_quoted(f, file)?;
                write!(f, ":{line}:{col}")
            }
            Location::Name(n) => write_quoted(f, n),
            Location::CallSite { callee, caller } => {
                f.write_str("callsite(")?;
                callee.write_inner(f)?;
                f.write_str(" at ")?;
                caller.write_inner(f)?;
                f.write_str(")")
            }
            Location::Fused(locs) => {
                f.write_str("fused[")?;
                for (i, l) in locs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    l.write_inner(f)?;
                }
                f.write_str("]")
            }
        }
    }
}

impl fmt::Display for Location {
    /// The bare form used in error messages: `"model.py":4:2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_inner(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_mlir() {
        let file = Location::File { file: "m.py".into(), line: 4, col: 2 };
        assert_eq!(file.to_string(), "\"m.py\":4:2");
        let cs = Location::CallSite { callee: Box::new(Location::Name("add".into())), caller: Box::new(file.clone()) };
        assert_eq!(cs.to_string(), "callsite(\"add\" at \"m.py\":4:2)");
        let fused = Location::Fused(vec![file, Location::Name("q\"x".into())]);
        assert_eq!(fused.to_string(), "fused[\"m.py\":4:2, \"q\\\"x\"]");
    }
}
