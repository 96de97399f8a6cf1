//! The CLI's one error type: a message printed on one line.

use std::fmt;

/// A command's failure, printed as `error: MESSAGE` with exit status 1.
#[derive(Debug)]
pub struct CliError(String);

impl CliError {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        CliError(msg.into())
    }
}

impl fmt::Display for CliError {
    /// The message on one line: line breaks in nested errors become `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<&str> = self.0.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        f.write_str(&lines.join("; "))
    }
}

impl std::error::Error for CliError {}

macro_rules! from_display {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                CliError(e.to_string())
            }
        }
    )*};
}
from_display!(relaxvm::Error, crate::CheckError, crate::npy::NpyError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line() {
        let e = CliError::new("boom\n  in function \"main\", instruction 0: ret  %0\n");
        assert_eq!(e.to_string(), "boom; in function \"main\", instruction 0: ret  %0");
    }
}
