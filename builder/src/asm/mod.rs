//! The text assembler: parses the text form that [`relaxvm::Executable::as_text`] prints back
//! into an executable, so that `assemble(&exe.as_text())` prints the same text again.
//!
//! ```
//! let exe = relaxvm_builder::assemble("
//! .const c[0] = int 10
//! .packed vm.op.add
//!
//! @main inputs=1 regs=2 params=(x):
//!   call  vm.op.add  in: %0, c[0]  dst: %1  loc(\"model.py\":3:1)
//!   ret  %1
//! ").unwrap();
//! assert_eq!(exe.func("main").unwrap().register_file_size, 2);
//! assert_eq!(relaxvm_builder::assemble(&exe.as_text()).unwrap().as_text(), exe.as_text());
//! ```
//!
//! The grammar is in `docs/text-format.md`. Beyond what `as_text()` prints, the assembler
//! accepts `#` comments, any amount of whitespace between tokens, a header without `regs=`
//! (the register file is then as large as the registers used need), a header with `sig=` but
//! without `inputs=` (the signature gives it) and a `call` without `dst:` (the result is
//! discarded). Every name a `call` or `f[...]` uses must be in the
//! function table: declared with `.packed` or defined with `@`, before or after the use.
//!
//! Errors carry a line and column and say what was expected and what was found; no input makes
//! the assembler panic.

mod constant;
mod cursor;
mod location;
mod parser;
mod resolve;

use relaxvm::Executable;

/// Why a text could not be assembled: where, and what was expected and found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AsmError {
    /// The 1-based line (0 when the error concerns no one line).
    pub line: usize,
    /// The 1-based column, in characters.
    pub col: usize,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for AsmError {
    /// `3:14: expected a register like %0, found "x"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "{}:{}: {}", self.line, self.col, self.message)
        }
    }
}

/// Parses `text` (the form [`Executable::as_text`] prints) into a verified executable.
pub fn assemble(text: &str) -> Result<Executable, AsmError> {
    resolve::resolve(parser::parse(text)?)
}
