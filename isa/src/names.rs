//! Function and parameter names as the text form writes them: plain when they can be, else
//! quoted.

use crate::location::write_quoted;

/// True when `s` can be printed without quotes as a function or parameter name.
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '$'))
}

/// Appends a name, quoted when it is not plain.
pub fn write_name(out: &mut String, s: &str) {
    if is_plain_name(s) {
        out.push_str(s);
    } else {
        write_quoted(out, s).expect("writing to a String");
    }
}
