//! Assembler refusals that the table in `asm.rs` does not cover: constants (dtypes, hex data, bool
//! values, string escapes) and locations (their syntax and nesting), each with its line and column.

use relaxvm_builder::assemble;

/// A program whose one call carries `loc(LOC)`.
fn with_loc(loc: &str) -> String {
    format!(".packed g\n@f inputs=1:\n call g in: %0 dst: %0 loc({loc})\n ret %0\n")
}

#[test]
fn constant_and_location_errors_say_where_and_what_was_expected() {
    let deep = format!("{}\"x\"{}", "callsite(".repeat(65), ")".repeat(65));
    let cases: Vec<(String, String)> = vec![
        (".const c[0] = dtype !".into(), "1:21: expected a dtype like float32, found \"!\"".into()),
        (".const c[0] = tensor uint8 (3) hex:abc".into(), "1:36: hex data has an odd number of digits (3)".into()),
        (
            ".const c[0] = str \"a\\q\"".into(),
            "1:21: expected an escape (\\\", \\\\, \\n, \\t, \\r or \\u{HEX}), found \"\\\\q\"".into(),
        ),
        (
            with_loc("5:1:1"),
            "3:28: expected a location: \"file\":line:col, \"name\", callsite(...) or fused[...], found \"5\"".into(),
        ),
        (".const c[0] = tensor bool (2) [true, maybe]".into(), "1:38: \"maybe\" is not true or false".into()),
        (with_loc(&deep), "3:604: location nested more than 64 levels deep".into()),
    ];
    let mut wrong = Vec::new();
    for (src, expected) in &cases {
        match assemble(src) {
            Ok(_) => wrong.push(format!("{src:?} assembled")),
            Err(e) if &e.to_string() != expected => {
                wrong.push(format!("source {src:?}\n  expected {expected}\n  found    {e}"))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
