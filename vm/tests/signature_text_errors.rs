//! The signature grammar's refusals (`relaxvm::types`, text form): each names what it expected,
//! where (the byte offset, shown as a column: at the word refused, not past it), and what it
//! found there.

use relaxvm::types::{ParseError, Signature};

fn err(text: &str) -> ParseError {
    Signature::parse_prefix(text).expect_err("refused")
}

#[test]
fn each_refusal_names_what_was_expected_where_and_what_was_found() {
    let cases: [(&str, usize, &str, &str); 6] = [
        ("(x: shape<4294967296>) -> i64", 10, "a rank below 2^32", r#""4294967296>)""#),
        ("(x: shape<-1>) -> i64", 10, "a non-negative integer", r#""-1>) -> i64""#),
        ("(x: tensor<[+], f32>) -> i64", 12, "a dimension (an integer, a name or ?)", r#""+], f32>) ->""#),
        ("(x: tensor<[2], 3>) -> i64", 16, "a dtype or ?", r#""3>) -> i64""#),
        (r#"(x: dict<{"a: i64}>) -> i64"#, 11, "a closing quote", r#""a: i64}>) ->""#),
        (
            r#"(x: dict<{"\u{110000}": i64}>) -> i64"#,
            11,
            r"a valid escape (\u{HEX} with 1 to 6 hex digits)",
            r#""\\u{110000}\":""#,
        ),
    ];
    let got: Vec<_> = cases.iter().map(|(text, ..)| err(text)).collect();
    let got: Vec<_> = got.iter().map(|e| (e.offset, e.expected.as_str(), e.found.as_str())).collect();
    let want: Vec<_> = cases.iter().map(|(_, o, e, f)| (*o, *e, *f)).collect();
    assert_eq!(got, want);
    // As an error of the runtime: the message says it is a signature, and the column.
    let e: relaxvm::Error = err("(x: shape<-1>) -> i64").into();
    assert_eq!(e.to_string(), r#"signature: expected a non-negative integer at column 11, found "-1>) -> i64""#);
}
