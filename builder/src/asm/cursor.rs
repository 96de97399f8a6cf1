//! A cursor over one line of assembly: the lexical primitives, each failing with an
//! [`AsmError`] that says what was expected and what was found, and where.

use super::AsmError;

/// A position in the source: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub line: usize,
    pub col: usize,
}

impl Pos {
    /// An error at this position.
    pub fn error(self, message: impl Into<String>) -> AsmError {
        AsmError { line: self.line, col: self.col, message: message.into() }
    }
}

/// Characters that end a token when describing what was found.
fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, ',' | '(' | ')' | '[' | ']' | ':' | '=' | '#')
}

/// True for characters of a plain (unquoted) name.
pub(super) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '$')
}

/// One line of source and a position in it (a byte offset, and the column it is at).
pub(super) struct Cursor<'a> {
    text: &'a str,
    line: usize,
    pos: usize,
    col: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `text`, which is line `line` of the source.
    pub fn new(text: &'a str, line: usize) -> Self {
        Cursor { text, line, pos: 0, col: 1 }
    }

    /// The current position.
    pub fn pos(&self) -> Pos {
        Pos { line: self.line, col: self.col }
    }

    /// The text not consumed yet.
    pub fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    /// The next character.
    pub fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        self.col += 1;
        Some(c)
    }

    /// Skips spaces and tabs; true when there were any.
    pub fn skip_ws(&mut self) -> bool {
        let start = self.pos;
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
        self.pos > start
    }

    /// True at the end of the line or at a `#` comment.
    pub fn at_end(&self) -> bool {
        matches!(self.peek(), None | Some('#'))
    }

    /// Consumes `s` if the text continues with it.
    pub fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            self.col += s.chars().count();
            true
        } else {
            false
        }
    }

    /// Describes what comes next, for "found ..." in errors.
    pub fn found(&self) -> String {
        let rest = self.rest();
        match rest.chars().next() {
            None | Some('#') => "end of line".to_string(),
            Some(c) if is_delimiter(c) => format!("{:?}", c.to_string()),
            Some(_) => {
                let token: String = rest.chars().take_while(|c| !is_delimiter(*c)).take(24).collect();
                format!("{token:?}")
            }
        }
    }

    /// "expected {what}, found ..." at the current position.
    pub fn expected(&self, what: &str) -> AsmError {
        self.pos().error(format!("expected {what}, found {}", self.found()))
    }

    /// Consumes `s` or fails with "expected {what}".
    pub fn expect(&mut self, s: &str, what: &str) -> Result<(), AsmError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    /// Requires whitespace (between two tokens), then skips it.
    pub fn expect_ws(&mut self, what: &str) -> Result<(), AsmError> {
        if self.skip_ws() {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    /// Requires the end of the line (after optional whitespace and a comment).
    pub fn expect_end(&mut self) -> Result<(), AsmError> {
        self.skip_ws();
        if self.at_end() {
            Ok(())
        } else {
            Err(self.expected("end of line"))
        }
    }

    /// Consumes the next `n` bytes (which must end on a character boundary).
    pub fn skip_bytes(&mut self, n: usize) {
        let end = (self.pos + n).min(self.text.len());
        while self.pos < end {
            self.bump();
        }
    }

    /// The position `n` bytes further on (on a character boundary), for errors.
    pub fn pos_after(&self, n: usize) -> Pos {
        let n = n.min(self.rest().len());
        Pos { line: self.line, col: self.col + self.rest()[..n].chars().count() }
    }

    /// Consumes the longest run of characters satisfying `pred`.
    pub fn take_while(&mut self, pred: impl Fn(char) -> bool) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(&pred) {
            self.bump();
        }
        &self.text[start..self.pos]
    }

    /// A decimal integer, optionally negative.
    pub fn int(&mut self, what: &str) -> Result<i64, AsmError> {
        let start = self.pos();
        let save = (self.pos, self.col);
        self.eat("-");
        let digits = self.take_while(|c| c.is_ascii_digit());
        if digits.is_empty() {
            (self.pos, self.col) = save;
            return Err(self.expected(what));
        }
        let text = &self.text[save.0..self.pos];
        text.parse().map_err(|_| start.error(format!("{text} is out of range for {what} (a 64-bit signed integer)")))
    }

    /// A decimal integer in `0..=u32::MAX`.
    pub fn uint(&mut self, what: &str) -> Result<u32, AsmError> {
        let start = self.pos();
        let digits = self.take_while(|c| c.is_ascii_digit());
        if digits.is_empty() {
            return Err(self.expected(what));
        }
        digits.parse().map_err(|_| start.error(format!("{digits} is out of range for {what} (at most {})", u32::MAX)))
    }

    /// A double-quoted string with `\"`, `\\`, `\n`, `\t`, `\r` and `\u{HEX}` escapes.
    pub fn string(&mut self, what: &str) -> Result<String, AsmError> {
        let start = self.pos();
        if !self.eat("\"") {
            return Err(self.expected(what));
        }
        let mut out = String::new();
        loop {
            let here = self.pos();
            match self.bump() {
                None => {
                    return Err(start.error("unterminated string: expected a closing '\"' before the end of the line"))
                }
                Some('"') => return Ok(out),
                Some('\\') => match self.bump() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some('u') => out.push(self.unicode_escape(here)?),
                    other => {
                        let found = other.map(|c| format!("{:?}", format!("\\{c}"))).unwrap_or("end of line".into());
                        return Err(here.error(format!(
                            "expected an escape (\\\", \\\\, \\n, \\t, \\r or \\u{{HEX}}), found {found}"
                        )));
                    }
                },
                Some(c) => out.push(c),
            }
        }
    }

    fn unicode_escape(&mut self, at: Pos) -> Result<char, AsmError> {
        self.expect("{", "'{' after \\u")?;
        let hex = self.take_while(|c| c.is_ascii_hexdigit());
        let code = (1..=6).contains(&hex.len()).then(|| u32::from_str_radix(hex, 16).ok()).flatten();
        let c =
            code.and_then(char::from_u32).ok_or_else(|| at.error(format!("invalid unicode escape \\u{{{hex}}}")))?;
        self.expect("}", "'}' closing the \\u{...} escape")?;
        Ok(c)
    }

    /// A function or parameter name: plain (`vm.op.add`) or quoted (`"odd name"`).
    pub fn name(&mut self, what: &str) -> Result<String, AsmError> {
        if self.peek() == Some('"') {
            return self.string(what);
        }
        let start = (self.pos, self.col);
        let word = self.take_while(is_name_char);
        if word.is_empty() || word.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
            (self.pos, self.col) = start;
            return Err(self.expected(what));
        }
        Ok(word.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let mut c = Cursor::new("  -42 7 \"a\\\"b\\u{e9}\" vm.op-x$ rest", 3);
        assert!(c.skip_ws());
        assert_eq!(c.int("an offset").unwrap(), -42);
        c.skip_ws();
        assert_eq!(c.uint("a count").unwrap(), 7);
        c.skip_ws();
        assert_eq!(c.string("a string").unwrap(), "a\"bé");
        c.skip_ws();
        assert_eq!(c.name("a name").unwrap(), "vm.op-x$");
        assert_eq!(c.pos(), Pos { line: 3, col: 30 });
        assert_eq!(c.expect_end().unwrap_err().to_string(), "3:31: expected end of line, found \"rest\"");
    }

    #[test]
    fn errors_say_what_was_expected_and_found() {
        let e = Cursor::new("x", 1).int("an offset").unwrap_err();
        assert_eq!(e.to_string(), "1:1: expected an offset, found \"x\"");
        let e = Cursor::new("99999999999", 2).uint("a register").unwrap_err();
        assert!(e.to_string().starts_with("2:1: 99999999999 is out of range"), "{e}");
        let e = Cursor::new("9223372036854775808", 1).int("an immediate").unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        assert_eq!(Cursor::new("-9223372036854775808", 1).int("x").unwrap(), i64::MIN);
        let e = Cursor::new("\"abc", 1).string("a string").unwrap_err();
        assert!(e.to_string().contains("unterminated string"), "{e}");
        let e = Cursor::new("\"a\\q\"", 1).string("a string").unwrap_err();
        assert!(e.to_string().starts_with("1:3: expected an escape"), "{e}");
        let e = Cursor::new("\"\\u{110000}\"", 1).string("s").unwrap_err();
        assert!(e.to_string().contains("invalid unicode escape"), "{e}");
        let e = Cursor::new("5abc", 1).name("a function name").unwrap_err();
        assert_eq!(e.to_string(), "1:1: expected a function name, found \"5abc\"");
        let e = Cursor::new("é", 1).name("a name").unwrap_err();
        assert_eq!(e.to_string(), "1:1: expected a name, found \"é\"");
        let mut c = Cursor::new("  # c", 1);
        c.skip_ws();
        assert!(c.at_end());
        assert_eq!(c.expected("x").to_string(), "1:3: expected x, found end of line");
    }
}
