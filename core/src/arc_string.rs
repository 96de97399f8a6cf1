//! A shared immutable string one pointer wide, so that [`Value`](crate::Value) stays 16 bytes.
//!
//! It is an `Arc<String>`, and named so: a thin pointer to a header that holds the string's own
//! pointer, so reading the text follows two pointers. An `Arc<str>` would read in one, but is
//! two words wide (pointer and length) and would make every `Value` 24 bytes. (It was called
//! `ArcStr`, a name that promised the `Arc<str>`; `crate::ArcStr` remains as a deprecated
//! alias.)

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A reference-counted string behind a thin pointer (an `Arc<String>`). Derefs to `str`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ArcString(Arc<String>);

impl ArcString {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when both handles share one string object.
    pub fn ptr_eq(&self, other: &ArcString) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for ArcString {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ArcString {
    fn from(s: &str) -> Self {
        ArcString(Arc::new(s.to_owned()))
    }
}

impl From<String> for ArcString {
    fn from(s: String) -> Self {
        ArcString(Arc::new(s))
    }
}

impl From<&String> for ArcString {
    fn from(s: &String) -> Self {
        ArcString(Arc::new(s.clone()))
    }
}

impl From<Arc<str>> for ArcString {
    fn from(s: Arc<str>) -> Self {
        ArcString(Arc::new(s.to_string()))
    }
}

impl fmt::Display for ArcString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ArcString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl PartialEq<str> for ArcString {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ArcString {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_and_string_like() {
        assert_eq!(std::mem::size_of::<ArcString>(), std::mem::size_of::<usize>());
        let s = ArcString::from("abc");
        assert_eq!(&*s, "abc");
        assert_eq!(s, "abc");
        assert_eq!(format!("{s} {s:?}"), "abc \"abc\"");
        assert_eq!(ArcString::from(String::from("x")).len(), 1);
    }
}
