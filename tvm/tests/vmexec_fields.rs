//! Every field the TVM readers read (the `relax.VMExecutable` reader and the module tree of
//! `__tvm_ffi__library_bin`), broken one at a time: a crafted file per field and per way to break
//! it, derived from valid files through the readers' own record of what they read
//! (`vmexec::bytes::record_fields`), so no offset table is kept here that could drift.
//!
//! The ways to break a field: cut the file inside it (`Cut`), set a count one element past the
//! bytes left (`Overflow`), make a string's first byte invalid UTF-8 (`NotUtf8`). The tables below
//! hold, per field and way, the whole message the reader must give, its values as placeholders
//! filled from the record: `{what}` (the reader's description), `{at}` (the byte offset its
//! errors report), `{n}` (the field's size, or the count written), `{need}` and `{left}`. The
//! literal text is what `scripts/error-coverage-sites.py` matches against each call site of the
//! message helpers, and the test fails when
//! - a row's message is caused by none of the crafted files (its text or offset drifted),
//! - a field the readers read, broken in a way that applies to it, has no row (a new field),
//! - a crafted file is accepted, or refused with an error that is not a format error.
//!
//! A row whose message is `None` is one the reader cannot give, because an earlier check makes
//! it unreachable (a string's bytes after its count was checked against the bytes left); the
//! test asserts that no crafted file causes it.

use relaxvm::ErrorKind;
use relaxvm_tvm::vmexec::bytes::{record_fields, FieldKind, FieldRead};
use relaxvm_tvm::{library_bin, vmexec};
use std::collections::{BTreeMap, BTreeSet};

#[path = "support/dmlc.rs"]
mod dmlc;
use dmlc::W;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Break {
    Cut,
    Overflow,
    NotUtf8,
}
use Break::*;

type Row = (&'static str, Break, Option<&'static str>);

/// The messages of `relax.VMExecutable`'s fields.
const VMEXEC: &[Row] = &[
    (
        "magic number",
        Cut,
        Some("{what} at byte {at}: magic number needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    ("version", Cut, Some("{what} at byte {at}: version needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "version",
        Overflow,
        Some("{what} at byte {at}: version count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    ("version", NotUtf8, Some("{what} at byte {at}: version is not valid UTF-8")),
    (
        "function table",
        Cut,
        Some("{what} at byte {at}: function table needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "function table",
        Overflow,
        Some("{what} at byte {at}: function table count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    (
        "function kind",
        Cut,
        Some("{what} at byte {at}: function kind needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "function name",
        Cut,
        Some("{what} at byte {at}: function name needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "function name",
        Overflow,
        Some("{what} at byte {at}: function name count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    ("function name", NotUtf8, Some("{what} at byte {at}: function name is not valid UTF-8")),
    ("start_instr", Cut, Some("{what} at byte {at}: start_instr needs {n} bytes, but only {left} remain (truncated?)")),
    ("end_instr", Cut, Some("{what} at byte {at}: end_instr needs {n} bytes, but only {left} remain (truncated?)")),
    ("num_args", Cut, Some("{what} at byte {at}: num_args needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "register_file_size",
        Cut,
        Some("{what} at byte {at}: register_file_size needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    ("param_names", Cut, Some("{what} at byte {at}: param_names needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "param_names",
        Overflow,
        Some("{what} at byte {at}: param_names count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    ("param_names", NotUtf8, Some("{what} at byte {at}: param_names is not valid UTF-8")),
    (
        "memory scopes",
        Cut,
        Some("{what} at byte {at}: memory scopes needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "memory scopes",
        Overflow,
        Some("{what} at byte {at}: memory scopes count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    (
        "memory scope index",
        Cut,
        Some("{what} at byte {at}: memory scope index needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "memory scope",
        Cut,
        Some("{what} at byte {at}: memory scope needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "memory scope",
        Overflow,
        Some("{what} at byte {at}: memory scope count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    ("memory scope", NotUtf8, Some("{what} at byte {at}: memory scope is not valid UTF-8")),
    (
        "constant pool",
        Cut,
        Some("{what} at byte {at}: constant pool needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "constant pool",
        Overflow,
        Some("{what} at byte {at}: constant pool count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    (
        "constant type index",
        Cut,
        Some("{what} at byte {at}: constant type index needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "int constant",
        Cut,
        Some("{what} at byte {at}: int constant needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "float constant",
        Cut,
        Some("{what} at byte {at}: float constant needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    ("dtype code", Cut, Some("{what} at byte {at}: dtype code needs {n} bytes, but only {left} remain (truncated?)")),
    ("dtype bits", Cut, Some("{what} at byte {at}: dtype bits needs {n} bytes, but only {left} remain (truncated?)")),
    ("dtype lanes", Cut, Some("{what} at byte {at}: dtype lanes needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "string constant",
        Cut,
        Some("{what} at byte {at}: string constant needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "string constant",
        Overflow,
        Some("{what} at byte {at}: string constant count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    ("string constant", NotUtf8, Some("{what} at byte {at}: string constant is not valid UTF-8")),
    (
        "shape constant",
        Cut,
        Some("{what} at byte {at}: shape constant needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "shape constant",
        Overflow,
        Some("{what} at byte {at}: shape constant count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    (
        "tensor magic",
        Cut,
        Some("{what} at byte {at}: tensor magic needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "tensor reserved field",
        Cut,
        Some("{what} at byte {at}: tensor reserved field needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "tensor device type",
        Cut,
        Some("{what} at byte {at}: tensor device type needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "tensor device id",
        Cut,
        Some("{what} at byte {at}: tensor device id needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    ("tensor ndim", Cut, Some("{what} at byte {at}: tensor ndim needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "tensor shape",
        Cut,
        Some("{what} at byte {at}: tensor shape needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "tensor nbytes",
        Cut,
        Some("{what} at byte {at}: tensor nbytes needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    ("tensor data", Cut, Some("{what} at byte {at}: tensor data needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "instr_offset",
        Cut,
        Some("{what} at byte {at}: instr_offset needs {n} bytes, but only {left} remain (truncated?)"),
    ),
    (
        "instr_offset",
        Overflow,
        Some("{what} at byte {at}: instr_offset count {n} needs at least {need} bytes, but only {left} remain"),
    ),
    ("instr_data", Cut, Some("{what} at byte {at}: instr_data needs {n} bytes, but only {left} remain (truncated?)")),
    (
        "instr_data",
        Overflow,
        Some("{what} at byte {at}: instr_data count {n} needs at least {need} bytes, but only {left} remain"),
    ),
];

/// The messages of the fields of `__tvm_ffi__library_bin` and its module tree.
const LIBRARY_BIN: &[Row] = &[
    ("size", Cut, Some("{what} at byte {at}: size needs {n} bytes, but only {left} remain (truncated?)")),
    // The tree is the rest of the symbol, whose size was compared with the size field just
    // before: a cut symbol fails that comparison ("the blob declares ...").
    ("module tree", Cut, None),
    ("import_tree_indptr", Cut, Some("{what} at byte {at}: import_tree_indptr needs {n} bytes, but only {left} remain (truncated?)")),
    ("import_tree_indptr", Overflow, Some("{what} at byte {at}: import_tree_indptr count {n} needs at least {need} bytes, but only {left} remain")),
    ("import_tree_child_indices", Cut, Some("{what} at byte {at}: import_tree_child_indices needs {n} bytes, but only {left} remain (truncated?)")),
    ("import_tree_child_indices", Overflow, Some("{what} at byte {at}: import_tree_child_indices count {n} needs at least {need} bytes, but only {left} remain")),
    ("module kind", Cut, Some("{what} at byte {at}: module kind needs {n} bytes, but only {left} remain (truncated?)")),
    ("module kind", Overflow, Some("{what} at byte {at}: module kind count {n} needs at least {need} bytes, but only {left} remain")),
    ("module kind", NotUtf8, Some("{what} at byte {at}: module kind is not valid UTF-8")),
    ("module payload", Cut, Some("{what} at byte {at}: module payload needs {n} bytes, but only {left} remain (truncated?)")),
    // The payload's bytes, after its count was checked against the bytes left.
    ("module payload bytes", Cut, None),
    ("module payload", Overflow, Some("{what} at byte {at}: module payload count {n} needs at least {need} bytes, but only {left} remain")),
];

/// The ways `r` can be broken.
fn breaks(r: &FieldRead) -> Vec<Break> {
    match r.kind {
        FieldKind::Fixed if r.len > 0 => vec![Cut],
        FieldKind::Fixed => vec![],
        FieldKind::Count { .. } => vec![Cut, Overflow],
        // A string's bytes were checked against the bytes left by its count: cutting them is
        // the count's overflow, tested there.
        FieldKind::Text if r.len > 0 => vec![NotUtf8],
        FieldKind::Text => vec![],
    }
}

/// `file` with field `r` broken by `how`, and the message the reader must give then. Every
/// reader here reads to the end of the file (a nested one after a prefix), so the bytes left
/// after a field are the file's.
fn broken(file: &[u8], r: &FieldRead, how: Break, text: &str) -> (Vec<u8>, String) {
    let off = r.addr - file.as_ptr() as usize;
    let mut out = file.to_vec();
    let (n, need, left) = match how {
        Cut => {
            out.truncate(off + r.len - 1);
            (r.len as u128, 0, r.len - 1)
        }
        Overflow => {
            let FieldKind::Count { item_size } = r.kind else { unreachable!("only counts overflow") };
            let left = file.len() - off - 8;
            let n = (left / item_size + 1) as u64;
            out[off..off + 8].copy_from_slice(&n.to_le_bytes());
            (n as u128, n as u128 * item_size as u128, left)
        }
        NotUtf8 => {
            out[off] = 0xff;
            (0, 0, 0)
        }
    };
    let message = text
        .replace("{what}", r.what)
        .replace("{at}", &r.pos.to_string())
        .replace("{need}", &need.to_string())
        .replace("{left}", &left.to_string())
        .replace("{n}", &n.to_string());
    (out, message)
}

/// Breaks every field `read` reads of each of `files` in every way that applies, and checks
/// the messages against `rows`. `seal` fixes up a broken file's framing (the size prefix of
/// the library blob) so that the break reaches the field; it gets the field broken.
fn check_fields(
    rows: &[Row],
    files: &[Vec<u8>],
    read: impl Fn(&[u8]) -> relaxvm::Result<()>,
    seal: impl Fn(&mut Vec<u8>, &FieldRead),
) {
    let table: BTreeMap<(&'static str, Break), Option<&'static str>> =
        rows.iter().map(|(f, b, t)| ((*f, *b), *t)).collect();
    assert_eq!(table.len(), rows.len(), "a field and break listed twice");
    let mut seen = BTreeSet::new();
    let mut caused: BTreeSet<(&'static str, Break)> = BTreeSet::new();
    // The other messages each field's breaks gave, for the failure message.
    let mut got: BTreeMap<(&'static str, Break), Vec<String>> = BTreeMap::new();
    // Breaks that gave another message than their row's (each one fails the test).
    let mut mismatched = Vec::new();
    for file in files {
        let (ok, fields) = record_fields(|| read(file));
        ok.expect("the valid file must load");
        assert!(!fields.is_empty(), "the reader recorded no field");
        for r in &fields {
            for how in breaks(r) {
                let Some((&key, expected)) = table.iter().find(|((f, b), _)| *f == r.field && *b == how) else {
                    panic!(
                        "field {:?} (at byte {} of {}) broken by {how:?} has no row in the table",
                        r.field, r.pos, r.what
                    )
                };
                seen.insert((r.field.clone(), how));
                // The text of an unreachable row is checked against every break of the field.
                let text = expected.unwrap_or("{what} at byte {at}: {field} needs");
                let (mut bad, message) = broken(file, r, how, &text.replace("{field}", &r.field));
                seal(&mut bad, r);
                let e = read(&bad).expect_err(&format!("{:?} broken by {how:?} must be refused", r.field));
                let ErrorKind::Format(e) = e.root().kind() else {
                    panic!("{:?} {how:?}: not a format error: {e:?}", r.field)
                };
                match expected {
                    Some(_) if *e == message => {
                        caused.insert(key);
                    }
                    // A cut may be caught first by a count read before the field (checked
                    // against the bytes left then): only that, at an earlier offset, is allowed.
                    Some(_) if how == Cut && earlier_count(e, r) => {
                        got.entry(key).or_default().push(format!("{e}  (expected {message})"));
                    }
                    Some(_) => {
                        mismatched.push(format!("{:?} {how:?} at byte {}: {e}\n    expected {message}", r.field, r.pos))
                    }
                    None => assert!(
                        !e.starts_with(&message),
                        "{:?} {how:?}: the unreachable message was given: {e}",
                        r.field
                    ),
                }
            }
        }
    }
    assert!(mismatched.is_empty(), "breaks that gave another message:\n{}", mismatched.join("\n"));
    for ((field, how), text) in &table {
        assert!(seen.contains(&(field.to_string(), *how)), "row ({field:?}, {how:?}): the readers read no such field");
        if let Some(text) = text {
            assert!(
                caused.contains(&(*field, *how)),
                "row ({field:?}, {how:?}): no crafted file caused {text:?}; they gave {:#?}",
                got.get(&(*field, *how))
            );
        }
    }
}

/// Whether `e` is the refusal of a count read before field `r` (at a smaller offset of the same
/// reader): what a file cut inside `r` may meet first.
fn earlier_count(e: &str, r: &FieldRead) -> bool {
    let Some(rest) = e.strip_prefix(r.what).and_then(|e| e.strip_prefix(" at byte ")) else { return false };
    let Some((at, msg)) = rest.split_once(": ") else { return false };
    at.parse::<usize>().is_ok_and(|at| at < r.pos) && msg.contains(" count ") && msg.contains(" needs at least ")
}

/// A valid program that reads every kind of field: two functions (a packed one, a VM one with a
/// parameter), four memory scopes, a constant of each type, and code. The first item of each
/// list is large, so that a later item cut short still passes the counts checked before it
/// (each is checked against the bytes left at the least size of an item) and reaches its own
/// field.
fn rich_program() -> Vec<u8> {
    let pad = "p".repeat(300);
    let mut w = W::default().u64(vmexec::MAGIC).str("0.14");
    w = w.u64(2);
    // A packed function ignores its numbers: distinct ones let the test tell the fields apart.
    w = w.i32(0).str(&pad).i64(11).i64(12).i64(13).i64(14).u64(1).str(&pad);
    w = w.i32(1).str("main").i64(0).i64(1).i64(1).i64(2).u64(1).str("x");
    w = w.u64(4);
    for _ in 0..4 {
        w = w.i64(0).str("global");
    }
    w = w.u64(6);
    w = w.i32(65).str(&pad); // string
    w = w.i32(1).i64(7); // int
    w = w.i32(3).bytes(&1.5f64.to_le_bytes()); // float
    w = w.i32(5).bytes(&[2, 32]).bytes(&1u16.to_le_bytes()); // dtype float32
    w = w.i32(69).vec_i64(&[2, 3]); // shape
                                    // A float32 tensor of shape (2,): magic, reserved, device (CPU, 0), ndim, dtype, shape,
                                    // nbytes, data.
    w = w.i32(70).u64(0xDD5E_40F0_96B4_A13F).u64(21).i32(1).i32(5).i32(1).bytes(&[2, 32]);
    w = w.bytes(&1u16.to_le_bytes()).i64(2).i64(8).bytes(&[0; 8]);
    w.vec_i64(&[0]).vec_i64(&[2, 0]).0
}

#[test]
fn every_field_of_a_vm_executable_is_refused_by_name_and_offset() {
    let rich = rich_program();
    vmexec::read(&rich).expect("the crafted program is a valid one");
    let tvm_built = include_bytes!("data/mlp.vmexec").to_vec();
    check_fields(VMEXEC, &[rich, tvm_built], |b| vmexec::read_parts(b).map(drop), |_, _| {});
}

#[test]
fn every_field_of_the_library_blob_is_refused_by_name_and_offset() {
    let program = rich_program();
    // Two module kinds and a payload before the last module, so that a cut one still passes
    // the index counts checked before it.
    let mut tree = W::default().vec_i64(&[0, 0, 1]).vec_i64(&[1]);
    tree = tree.str("_lib").str("relax.VMExecutable").u64(program.len() as u64).bytes(&program);
    tree = tree.str("_lib");
    let blob = W::default().u64(tree.0.len() as u64).bytes(&tree.0).0;
    let read = |b: &[u8]| library_bin::modules(b).map(drop);
    // The size prefix follows a broken tree (a cut one is shorter), except when the prefix itself
    // is the field broken.
    let seal = |bad: &mut Vec<u8>, r: &FieldRead| {
        if r.what != "__tvm_ffi__library_bin" && bad.len() >= 8 {
            let n = (bad.len() - 8) as u64;
            bad[..8].copy_from_slice(&n.to_le_bytes());
        }
    };
    check_fields(LIBRARY_BIN, &[blob], read, seal);
}

/// The record's labels checked against the bytes they point at, with values the crafted program
/// wrote for each field (distinct ones): two reads whose names were swapped would fail here,
/// which the tables, built on the same names, cannot see.
#[test]
fn each_recorded_field_holds_the_value_written_for_it() {
    let rich = rich_program();
    let (_, fields) = record_fields(|| vmexec::read_parts(&rich).map(drop));
    let written: &[(&str, i64)] = &[
        ("function kind", 0),
        ("start_instr", 11),
        ("end_instr", 12),
        ("num_args", 13),
        ("register_file_size", 14),
        ("tensor reserved field", 21),
        ("tensor device type", 1),
        ("tensor device id", 5),
        ("int constant", 7),
        ("tensor nbytes", 8),
    ];
    for (name, value) in written {
        // The first read of each name: the packed function's fields, the one tensor's.
        let f = fields.iter().find(|f| f.field == *name).unwrap_or_else(|| panic!("no {name:?} read"));
        let at = f.addr - rich.as_ptr() as usize;
        let mut le = [0u8; 8];
        le[..f.len].copy_from_slice(&rich[at..at + f.len]);
        assert_eq!(i64::from_le_bytes(le), *value, "{name:?} at byte {}", f.pos);
    }
}

#[test]
fn recording_is_scoped_to_the_call() {
    let rich = rich_program();
    let (_, fields) = record_fields(|| vmexec::read_parts(&rich).map(drop));
    assert_eq!(fields[0].field, "magic number");
    assert_eq!((fields[0].pos, fields[0].len, fields[0].kind), (0, 8, FieldKind::Fixed));
    assert_eq!(fields[1].kind, FieldKind::Count { item_size: 1 });
    assert_eq!((fields[2].field.as_str(), fields[2].kind), ("version", FieldKind::Text));
    // Outside `record_fields`, nothing is recorded; a nested recording does not leak into the
    // outer one.
    let (_, outer) = record_fields(|| {
        let (_, inner) = record_fields(|| vmexec::read_parts(&rich).map(drop));
        assert_eq!(inner.len(), fields.len());
    });
    assert!(outer.is_empty(), "{outer:?}");
}
