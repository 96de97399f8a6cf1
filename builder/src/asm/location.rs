//! Locations in MLIR syntax: `"file":line:col`, `"name"`, `callsite(A at B)`, `fused[A, B]`.

use super::cursor::Cursor;
use super::AsmError;
use relaxvm::Location;

/// How deeply `callsite(...)` and `fused[...]` may nest (bounds the parser's recursion).
pub(super) const MAX_DEPTH: usize = 64;

/// Parses `loc(...)`.
pub(super) fn parse_loc(c: &mut Cursor<'_>) -> Result<Location, AsmError> {
    c.expect("loc(", "a location `loc(...)`")?;
    let loc = parse_inner(c, 0)?;
    c.skip_ws();
    c.expect(")", "')' closing loc(")?;
    Ok(loc)
}

fn parse_inner(c: &mut Cursor<'_>, depth: usize) -> Result<Location, AsmError> {
    if depth >= MAX_DEPTH {
        return Err(c.pos().error(format!("location nested more than {MAX_DEPTH} levels deep")));
    }
    c.skip_ws();
    if c.eat("callsite(") {
        let callee = parse_inner(c, depth + 1)?;
        c.expect_ws("' at ' in callsite(CALLEE at CALLER)")?;
        c.expect("at", "'at' in callsite(CALLEE at CALLER)")?;
        c.expect_ws("a location after 'at'")?;
        let caller = parse_inner(c, depth + 1)?;
        c.skip_ws();
        c.expect(")", "')' closing callsite(")?;
        return Ok(Location::CallSite { callee: Box::new(callee), caller: Box::new(caller) });
    }
    if c.eat("fused[") {
        let mut locs = Vec::new();
        c.skip_ws();
        if !c.eat("]") {
            loop {
                locs.push(parse_inner(c, depth + 1)?);
                c.skip_ws();
                if c.eat("]") {
                    break;
                }
                c.expect(",", "',' or ']' in fused[...]")?;
            }
        }
        return Ok(Location::Fused(locs));
    }
    if c.peek() != Some('"') {
        return Err(c.expected("a location: \"file\":line:col, \"name\", callsite(...) or fused[...]"));
    }
    let name = c.string("a quoted file or name")?;
    if !c.eat(":") {
        return Ok(Location::Name(name));
    }
    let line = c.uint("a line number")?;
    c.expect(":", "':' before the column")?;
    let col = c.uint("a column number")?;
    Ok(Location::File { file: name, line, col })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Location, AsmError> {
        let mut c = Cursor::new(s, 1);
        let l = parse_loc(&mut c)?;
        c.expect_end()?;
        Ok(l)
    }

    #[test]
    fn round_trips_every_kind() {
        let file = Location::File { file: "m.py".into(), line: 4, col: 2 };
        let all = Location::Fused(vec![
            file.clone(),
            Location::CallSite { callee: Box::new(Location::Name("add".into())), caller: Box::new(file) },
            Location::Fused(vec![]),
            Location::Name("q\"x\n".into()),
        ]);
        let text = format!("loc({all})");
        assert_eq!(parse(&text).unwrap(), all);
        assert_eq!(parse("loc( fused[ \"a\" ,\"b\" ] )").unwrap().to_string(), "fused[\"a\", \"b\"]");
    }

    #[test]
    fn errors() {
        let e = parse("loc(nowhere)").unwrap_err().to_string();
        assert!(e.starts_with("1:5: expected a location"), "{e}");
        assert!(parse("loc(\"a\":1)").unwrap_err().to_string().contains("expected ':' before the column"));
        assert!(parse("loc(callsite(\"a\" \"b\"))").unwrap_err().to_string().contains("'at'"));
        assert!(parse("loc(fused[\"a\" \"b\"])").unwrap_err().to_string().contains("',' or ']'"));
        let deep = format!("loc({}\"x\"{})", "fused[".repeat(100), "]".repeat(100));
        assert!(parse(&deep).unwrap_err().to_string().contains("nested more than 64"));
    }
}
