//! Every named varint field of relaxvm's own format (counts, indexes, 32-bit values), broken one
//! at a time: from a valid file, the readers' record of what they read
//! (`format::field_record::record_fields`) gives each field's offset and check, and the test
//! writes the file with that field set just past its check (a count one item past the bytes
//! left, an index at its bound, a 32-bit value at 2^32), re-frames the sections around the longer
//! varint and reseals the checksums, so the reader reaches the field itself.
//!
//! The table holds, per field and check, the whole message with its values as placeholders:
//! `{where}` (the section, or the header), `{at}` (the field's file offset), `{v}`, `{left}` and
//! `{bound}` (`scripts/error-coverage-sites.py` matches its literal text against the call sites
//! of the cursor's checks). The test fails when a row's message is caused by no file, or a field
//! the readers read has no row.

use relaxvm::format::field_record::{record_fields, FieldKind, FieldRead};
use relaxvm::format::{self, LoadOptions};
use relaxvm::ErrorKind;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Check {
    Count,
    Index,
    U32,
}
use Check::*;

/// (field, check, the message).
const ROWS: &[(&str, Check, &str)] = &[
    (
        "shape constant dimension count",
        Count,
        "{where} at byte {at}: shape constant dimension count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "tensor dimension count",
        Count,
        "{where} at byte {at}: tensor dimension count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "type dimension count",
        Count,
        "{where} at byte {at}: type dimension count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "extra argument count",
        Count,
        "{where} at byte {at}: extra argument count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "called function index",
        Index,
        "{where} at byte {at}: called function index {v} out of range (there are {bound})",
    ),
    (
        "function argument index",
        Index,
        "{where} at byte {at}: function argument index {v} out of range (there are {bound})",
    ),
    (
        "string constant index",
        Index,
        "{where} at byte {at}: string constant index {v} out of range (there are {bound})",
    ),
    ("argument register", U32, "{where} at byte {at}: argument register {v} does not fit in 32 bits"),
    ("result register", U32, "{where} at byte {at}: result register {v} does not fit in 32 bits"),
    ("condition register", U32, "{where} at byte {at}: condition register {v} does not fit in 32 bits"),
    ("destination register", U32, "{where} at byte {at}: destination register {v} does not fit in 32 bits"),
    (
        "producer byte count",
        Count,
        "{where} at byte {at}: producer byte count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "string count",
        Count,
        "{where} at byte {at}: string count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "function count",
        Count,
        "{where} at byte {at}: function count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "constant count",
        Count,
        "{where} at byte {at}: constant count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "tuple item count",
        Count,
        "{where} at byte {at}: tuple item count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "instruction count",
        Count,
        "{where} at byte {at}: instruction count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "argument count",
        Count,
        "{where} at byte {at}: argument count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "function entry count",
        Count,
        "{where} at byte {at}: function entry count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "parameter name count",
        Count,
        "{where} at byte {at}: parameter name count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "location count",
        Count,
        "{where} at byte {at}: location count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "fused location count",
        Count,
        "{where} at byte {at}: fused location count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "tuple slot count",
        Count,
        "{where} at byte {at}: tuple slot count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "dict slot count",
        Count,
        "{where} at byte {at}: dict slot count {v} cannot fit in the {left} bytes left in the section",
    ),
    ("constant index", Index, "{where} at byte {at}: constant index {v} out of range (there are {bound})"),
    ("function index", Index, "{where} at byte {at}: function index {v} out of range (there are {bound})"),
    ("entry function index", Index, "{where} at byte {at}: entry function index {v} out of range (there are {bound})"),
    (
        "location index (must refer to an earlier location)",
        Index,
        "{where} at byte {at}: location index (must refer to an earlier location) {v} out of range (there are {bound})",
    ),
    ("location reference", Index, "{where} at byte {at}: location reference {v} out of range (there are {bound})"),
    (
        "libraries count",
        Count,
        "{where} at byte {at}: libraries count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "parameter count",
        Count,
        "{where} at byte {at}: parameter count {v} cannot fit in the {left} bytes left in the section",
    ),
    (
        "signature count",
        Count,
        "{where} at byte {at}: signature count {v} cannot fit in the {left} bytes left in the section",
    ),
    ("string index", Index, "{where} at byte {at}: string index {v} out of range (there are {bound})"),
    ("start instruction", U32, "{where} at byte {at}: start instruction {v} does not fit in 32 bits"),
    ("instruction count", U32, "{where} at byte {at}: instruction count {v} does not fit in 32 bits"),
    ("argument count", U32, "{where} at byte {at}: argument count {v} does not fit in 32 bits"),
    ("register count", U32, "{where} at byte {at}: register count {v} does not fit in 32 bits"),
    ("line", U32, "{where} at byte {at}: line {v} does not fit in 32 bits"),
    ("column", U32, "{where} at byte {at}: column {v} does not fit in 32 bits"),
];

/// A program that makes the readers read every kind of field: constants of each kind (a tuple, a
/// shape, a tensor), calls with constant and function arguments, locations of each form,
/// parameter names, signatures with tuple and dict types, and an entry function.
const PROGRAM: &str = r#"
.const c[0] = shape (2, 3)
.const c[1] = str "a string constant"
.const c[2] = tensor float32 (3,) [1.5, -2.0, 0.25]
.const c[3] = tuple (int 1, tuple (str "x", shape (4,)))

@helper inputs=1 regs=1 sig=(x: tensor<[n, 3], f32>) -> any:
  ret  %0  loc("m.py":3:4)

@main inputs=2 regs=5 sig=(a: tuple<i64, shape<2>>, b: dict<{k: i32}>) -> any:
  call  vm.builtin.make_tuple  in: f[helper]  dst: %4
  if  %0  2
  goto  1
  call  vm.builtin.make_tuple  in: c[0], c[1], c[2], c[3]  dst: %2  loc(callsite("f" at "m.py":1:2))
  call  helper  in: %0  dst: %3  loc(fused["a.py":1:1, "b.py":2:2])
  call  vm.builtin.make_tuple  in: %0, %1, %2, %3, %0, %1, %2, %3, %0, %1, %2, %3, %0, %1, %2, %3, %0, %1, %2, %3  dst: %3
  ret  %2  loc("m.py":9:1)
.packed vm.builtin.make_tuple
.entry main
"#;

/// `v` as the format's varint (MLIR's PrefixVarInt: the first byte's trailing zeros count the
/// bytes that follow).
fn leb(v: u64) -> Vec<u8> {
    let n = (64 - v.leading_zeros() as usize).div_ceil(7).max(1);
    if n > 8 {
        return [&[0u8][..], &v.to_le_bytes()].concat();
    }
    (((v << n) | (1 << (n - 1))).to_le_bytes()[..n]).to_vec()
}

/// The varint at the start of `b`, and its size.
fn read_leb(b: &[u8]) -> (u64, usize) {
    if b[0] == 0 {
        return (u64::from_le_bytes(b[1..9].try_into().unwrap()), 9);
    }
    let n = b[0].trailing_zeros() as usize + 1;
    let mut buf = [0u8; 8];
    buf[..n].copy_from_slice(&b[..n]);
    (u64::from_le_bytes(buf) >> n, n)
}

/// `file` with the varint of `f` replaced by `v`, its sections re-framed and its checksums
/// resealed; and where the field is then, and what holds it (`"header"`, `"NAME section"`).
fn with_field(file: &[u8], f: &FieldRead, v: u64) -> (Vec<u8>, u64, String) {
    let info = format::inspect(file).unwrap();
    let at = f.offset as usize;
    let splice = |bytes: &[u8], k: usize| [&bytes[..k], &leb(v)[..], &bytes[k + f.len..]].concat();
    let first = info.sections[0].header_offset as usize;
    let (mut out, mut found) = if at < first {
        (splice(&file[..first], at), Some((at as u64, "header".to_string())))
    } else {
        (file[..first].to_vec(), None)
    };
    for s in &info.sections {
        let (start, end) = (s.data.start as usize, s.data.end as usize);
        let holds = (start..end).contains(&at);
        let data = if holds { splice(&file[start..end], at - start) } else { file[start..end].to_vec() };
        out.push(s.id);
        out.extend(leb(data.len() as u64));
        if s.id & 0x80 != 0 {
            // An aligned section: its alignment follows the length, then padding to it.
            let h = s.header_offset as usize + 1;
            let align = read_leb(&file[h + read_leb(&file[h..]).1..]).0;
            out.extend(leb(align));
            let pad = (align - out.len() as u64 % align) % align;
            out.extend(std::iter::repeat_n(0xCB, pad as usize));
        }
        if holds {
            found = Some(((out.len() + at - start) as u64, format!("{} section", s.name.unwrap())));
        }
        out.extend(data);
    }
    // A broken header fails resealing as it fails loading: the load reports it.
    format::reseal(&mut out).ok();
    let (offset, place) = found.expect("the field lies in the header or a section");
    (out, offset, place)
}

#[test]
fn every_named_field_of_the_format_is_refused_by_name_and_offset() {
    let exe = relaxvm_builder::assemble(PROGRAM).unwrap();
    // Every version the writer writes: older ones store parameter names in their own section
    // and arguments as a count.
    let files: Vec<Vec<u8>> = (1..=format::CURRENT_VERSION)
        .map(|version| {
            let opts = format::SaveOptions { version, ..Default::default() };
            format::try_save_to_bytes(&exe, &opts).unwrap_or_else(|e| panic!("version {version}: {e}"))
        })
        .collect();
    let load = |b: &[u8]| format::load_bytes_with(b, &LoadOptions::default()).map(drop);
    // And a program that references a native library (a libraries section; the format's
    // reader records the reference, a loader decides whether to open it).
    let with_library = {
        let mut parts = exe.to_parts();
        parts.libraries = vec![relaxvm::executable::Library {
            reference: relaxvm::LibraryRef { path: "/nonexistent/kernels.so".into(), content_hash: 7 },
            loaded: None,
        }];
        relaxvm::Executable::from_parts(parts).unwrap().save_to_bytes()
    };
    let table: BTreeMap<(&str, Check), &str> = ROWS.iter().map(|(w, c, t)| ((*w, *c), *t)).collect();
    assert_eq!(table.len(), ROWS.len(), "a row listed twice");
    let mut seen: BTreeSet<(String, Check)> = BTreeSet::new();
    let mut caused: BTreeSet<(String, Check)> = BTreeSet::new();
    let mut other: BTreeMap<(String, Check), Vec<String>> = BTreeMap::new();
    let mut no_row = BTreeSet::new();
    let mut mismatched: Vec<String> = Vec::new();
    for file in files.iter().chain([&with_library]) {
        let (ok, fields) = record_fields(|| load(file));
        ok.expect("the program loads");
        for f in &fields {
            let (check, v, left, bound) = match f.kind {
                FieldKind::Count { per_byte, left } => (Count, (left * per_byte) as u64 + 1, left, 0),
                FieldKind::Index { bound } => (Index, bound as u64, 0, bound),
                FieldKind::U32 => (U32, 1 << 32, 0, 0),
            };
            let key = (f.what.clone(), check);
            let Some(text) = table.iter().find(|((w, c), _)| *w == f.what && *c == check).map(|(_, t)| *t) else {
                no_row.insert(format!("{:?} ({check:?}, first at byte {})", f.what, f.offset));
                continue;
            };
            seen.insert(key.clone());
            let (bad, at, place) = with_field(file, f, v);
            // The header reads to the end of the file, which the re-framing keeps the same length
            // (the tensor data's padding takes up a longer varint): the bytes left are the file's.
            let left = if place == "header" { bad.len() - at as usize - leb(v).len() } else { left };
            let want = text
                .replace("{where}", &place)
                .replace("{at}", &at.to_string())
                .replace("{what}", &f.what)
                .replace("{v}", &v.to_string())
                .replace("{left}", &left.to_string())
                .replace("{bound}", &bound.to_string());
            let e = load(&bad).expect_err(&format!("{:?} set to {v} must be refused", f.what));
            let ErrorKind::Format(got) = e.root().kind() else { panic!("{:?}: not a format error: {e:?}", f.what) };
            if *got == want {
                caused.insert(key);
            } else {
                // Every instance of a field must give its row's message, not only one of them.
                mismatched.push(format!("{:?} at byte {}: {got}\n    expected {want}", f.what, f.offset));
                other.entry(key).or_default().push(format!("{got}  (expected {want})"));
            }
        }
    }
    assert!(no_row.is_empty(), "fields the readers read that have no row in the table: {no_row:#?}");
    assert!(mismatched.is_empty(), "instances that gave another message:\n{}", mismatched.join("\n"));
    let mut bad_rows = Vec::new();
    for (what, check) in table.keys() {
        let key = (what.to_string(), *check);
        if !seen.contains(&key) {
            bad_rows.push(format!("row ({what:?}, {check:?}): the readers read no such field"));
        } else if !caused.contains(&key) {
            bad_rows.push(format!("row ({what:?}, {check:?}): no crafted file caused it; got {:#?}", other.get(&key)));
        }
    }
    assert!(bad_rows.is_empty(), "{}", bad_rows.join("\n"));
}
