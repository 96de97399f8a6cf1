//! Traces built by hand: listing deep recursion, checking counts, comparing what was not
//! compared, and files crafted to expand, nest or contradict themselves.

use super::copy::tests::doubled;
use super::*;
use crate::npy;
use crate::tensor::Tensor;
use std::io::Write;
use std::sync::Arc;
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// A step of a straight-line run: `index` at `depth`, returning at `end`.
fn step(index: usize, depth: usize, end: usize, values: Option<StepValues>) -> TraceStep {
    TraceStep { index, function: "main".into(), pc: index, callee: "f".into(), depth, end, failed: false, values }
}

fn int_result(x: i64) -> Option<StepValues> {
    Some(StepValues { args: vec![], result: Value::Int(x), outputs: vec![] })
}

/// `n` calls one after the other, each returning `x`.
fn flat(n: usize, x: i64) -> Trace {
    Trace {
        function: "main".into(),
        steps: (0..n).map(|i| step(i, 0, i + 1, int_result(x))).collect(),
        ..Trace::default()
    }
}

/// A recursion `n` deep: step `i` at depth `i`, all returning at the end.
fn recursion(n: usize) -> Trace {
    Trace { function: "main".into(), steps: (0..n).map(|i| step(i, i, n, None)).collect(), ..Trace::default() }
}

#[test]
fn deep_recursion_lists_with_a_bounded_indent() {
    let trace = recursion(40_000);
    assert!(trace.check().is_ok());
    let text = trace.to_string();
    let last = text.lines().last().unwrap();
    assert!(last.contains("[depth 39999] main pc 39999: f(values dropped)"), "{last}");
    assert_eq!(last.len(), " 39999  ".len() + 2 * MAX_INDENT + "[depth 39999] main pc 39999: f(values dropped)".len());
    // Linear in the steps: no line is wider than the bounded indent allows.
    assert!(text.lines().all(|l| l.len() < 200));
    let shallow = recursion(3).to_string();
    assert!(shallow.ends_with("\n     2      main pc 2: f(values dropped)"), "{shallow}");
}

#[test]
fn check_refuses_counts_that_contradict_each_other() {
    let err = |t: &Trace| t.check().unwrap_err().to_string();
    let mut t = flat(3, 1);
    t.skipped = usize::MAX;
    assert!(err(&t).contains("more steps than can be counted"), "{}", err(&t));
    let mut t = flat(3, 1);
    t.steps[1].index = 7;
    assert!(err(&t).contains("index 7), field index: expected 1"), "{}", err(&t));
    let mut t = flat(3, 1);
    t.steps[2].end = 2;
    assert!(err(&t).contains("field end: 2 is not after"), "{}", err(&t));
    let mut t = flat(3, 1);
    t.steps[0].end = 4;
    assert!(err(&t).contains("at most the 3 steps"), "{}", err(&t));
    // Step 1 starts inside step 0 (which ends at 3) but claims depth 0.
    let mut t = flat(3, 1);
    t.steps[0].end = 3;
    assert!(err(&t).contains("field depth: 0, but the call enclosing it is at depth 0"), "{}", err(&t));
    // Inside step 0 (ending at 2), step 1 may not end after it.
    let mut t = recursion(3);
    t.steps[0].end = 2;
    t.steps[1].end = 3;
    assert!(err(&t).contains("after the end (2)"), "{}", err(&t));
    let mut t = flat(2, 1);
    t.steps[0].depth = 1;
    assert!(err(&t).contains("no kept call encloses it and only 0 were dropped"), "{}", err(&t));
    let mut t = flat(2, 1);
    t.skipped = 1;
    for s in &mut t.steps {
        s.index += 1;
        s.end += 1;
        s.depth = 1;
    }
    assert!(t.check().is_ok(), "a step inside a dropped call");
    let mut t = flat(1, 1);
    t.steps[0].values.as_mut().unwrap().outputs = vec![(0, Value::Null)];
    assert!(err(&t).contains("field outputs: argument index 0"), "{}", err(&t));
    let mut t = flat(1, 1);
    let v = t.steps[0].values.as_mut().unwrap();
    v.args = vec![Value::Null, Value::Null];
    v.outputs = vec![(1, Value::Null), (1, Value::Null)];
    assert!(err(&t).contains("argument index 1"), "{}", err(&t));
}

#[test]
fn first_difference_reports_steps_only_one_trace_kept() {
    let (a, b) = (flat(5, 1), flat(5, 2));
    assert_eq!(a.first_difference(&b, Tolerance::default()).unwrap().index, 0);
    // A huge `skipped` (no file can carry it past `check`) still compares to an answer.
    let mut crafted = Trace { skipped: usize::MAX, ..Trace::default() };
    let d = crafted.first_difference(&b, Tolerance::default()).unwrap();
    assert_eq!((d.index, d.what.as_str()), (0, "skipped"), "{d}");
    crafted.skipped = usize::MAX - 1;
    crafted.steps = vec![step(usize::MAX - 1, 0, usize::MAX, int_result(1))];
    assert!(a.first_difference(&crafted, Tolerance::default()).is_some());
    // Dropped from one trace, kept by the other: not compared, so not "no difference".
    let mut c = flat(5, 1);
    c.steps.drain(..2);
    c.skipped = 2;
    let d = a.first_difference(&c, Tolerance::default()).unwrap();
    assert_eq!((d.index, d.what.as_str()), (0, "skipped"));
    assert!(d.detail.contains("the second trace dropped steps 0 to 1 (skipped = 2)"), "{}", d.detail);
    // A real difference among the steps both kept is reported first.
    let mut e = c.clone();
    e.steps[2].values = int_result(9);
    assert_eq!(a.first_difference(&e, Tolerance::default()).unwrap().index, 4);
    // Both dropped the same steps: the rest agree.
    assert!(c.first_difference(&c.clone(), Tolerance::default()).is_none());
}

#[test]
fn shared_tuples_compare_in_linear_time() {
    // 2^40 leaves unfolded, 41 tuples: each pair of tuples is compared once.
    let (x, y) = (doubled(40), doubled(40));
    let with = |v: Value| Trace {
        steps: vec![step(0, 0, 1, Some(StepValues { args: vec![], result: v, outputs: vec![] }))],
        ..Trace::default()
    };
    assert!(with(x.clone()).first_difference(&with(y), Tolerance::default()).is_none());
    let mut z = Value::Tensor(Tensor::from_vec([1], vec![2i64]).unwrap());
    for _ in 0..40 {
        z = Value::tuple(vec![z.clone(), z]);
    }
    let d = with(x).first_difference(&with(z), Tolerance::default()).unwrap();
    assert!(d.detail.starts_with("[0]: [0]: "), "{}", d.detail);
}

#[test]
fn shared_tuples_save_once_and_load_shared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.npz");
    let v = doubled(40);
    let mut t = flat(2, 1);
    t.steps[0].values.as_mut().unwrap().result = v.clone();
    t.steps[1].values.as_mut().unwrap().args = vec![v.clone()];
    t.result = v;
    t.save(&path).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 64 << 10, "one array, 41 tuples");
    let back = Trace::load(&path).unwrap();
    assert!(t.first_difference(&back, Tolerance::default()).is_none());
    let Value::Tuple(items) = &back.result else { panic!("a tuple") };
    let (Value::Tuple(p), Value::Tuple(q)) = (&items[0], &items[1]) else { panic!("two tuples") };
    assert!(Arc::ptr_eq(p, q), "sharing survives the file");
}

/// Writes an archive of `members` (name without `.npy`, bytes, deflated?).
fn archive(path: &std::path::Path, members: &[(&str, Vec<u8>, bool)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes, deflate) in members {
        let method = if *deflate { CompressionMethod::Deflated } else { CompressionMethod::Stored };
        zip.start_file(format!("{name}.npy"), SimpleFileOptions::default().compression_method(method)).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

fn json_member(json: &str) -> (&'static str, Vec<u8>, bool) {
    let t = Tensor::from_vec([json.len() as i64], json.as_bytes().to_vec()).unwrap();
    (file::META, npy::to_bytes(&t).unwrap(), false)
}

fn meta_with(steps: &str, result: &str) -> String {
    format!(
        r#"{{"format":"relaxvm-trace","version":2,"function":"main","skipped":0,"max_bytes":1,"steps":[{steps}],"result":{result}}}"#
    )
}

fn load_err(path: &std::path::Path) -> String {
    Trace::load(path).unwrap_err().to_string()
}

#[test]
fn one_array_named_many_times_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.npz");
    // 16 MiB of zeros deflate to about 16 KiB; the JSON names the array 1000 times (16 GB if
    // each name read it again).
    let zeros = npy::to_bytes(&Tensor::from_vec([16 << 20], vec![0u8; 16 << 20]).unwrap()).unwrap();
    let refs = vec![r#"{"tensor":{"array":"z","dtype":"uint8","shape":[16777216]}}"#; 1000].join(",");
    let json = meta_with(
        &format!(
            r#"{{"index":0,"function":"main","pc":0,"callee":"f","depth":0,"end":1,"failed":false,"values":{{"args":[{refs}],"result":"null","outputs":[]}}}}"#
        ),
        r#""null""#,
    );
    archive(&path, &[json_member(&json), ("z", zeros, true)]);
    assert!(std::fs::metadata(&path).unwrap().len() < 256 << 10);
    let t = Trace::load(&path).unwrap();
    let args = &t.steps[0].values.as_ref().unwrap().args;
    assert_eq!(args.len(), 1000);
    let (Value::Tensor(a), Value::Tensor(b)) = (&args[0], &args[999]) else { panic!("tensors") };
    assert!(a.shares_storage(b), "one array, shared");
    // Under a smaller limit the same file is refused, naming the array.
    let e = Trace::load_within(&path, Some(8 << 20)).unwrap_err().to_string();
    assert!(e.contains(r#"array "z" needs 16777344 bytes"#) && e.contains("load limit of 8388608"), "{e}");
}

#[test]
fn the_json_is_bounded_in_depth_and_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.npz");
    let deep = format!("{}{}", r#"{"tuple":["#.repeat(100), r#"]}"#.repeat(100));
    archive(&path, &[json_member(&meta_with("", &deep))]);
    let e = load_err(&path);
    assert!(e.contains("__trace__: the JSON nests 201 deep at byte") && e.contains("more than the 80"), "{e}");
    // Exactly at the tuple limit loads; one deeper is refused by the decoder, naming the place.
    let at = |n: usize| format!("{}{}{}", r#"{"tuple":["#.repeat(n), r#""null""#, r#"]}"#.repeat(n));
    archive(&path, &[json_member(&meta_with("", &at(32)))]);
    assert!(Trace::load(&path).is_ok());
    archive(&path, &[json_member(&meta_with("", &at(33)))]);
    assert!(load_err(&path).contains("value result.0.0.0"), "{}", load_err(&path));
    // Many small entries cost their parsed size: a limit refuses them before parsing.
    let many = format!(r#"{{"tuple":[{}]}}"#, vec![r#""null""#; 100_000].join(","));
    archive(&path, &[json_member(&meta_with("", &many))]);
    assert!(Trace::load(&path).is_ok());
    let e = Trace::load_within(&path, Some(4 << 20)).unwrap_err().to_string();
    assert!(e.contains("__trace__: the JSON's ") && e.contains(" entries (at 128 bytes each)"), "{e}");
    // The cost per entry covers what the parsed entries take.
    assert!(std::mem::size_of::<file::Encoded>() <= 128 && std::mem::size_of::<file::StepMeta>() <= 8 * 128);
}

#[test]
fn members_must_match_their_entries_and_headers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npz");
    let value = |shape: &str| format!(r#"{{"tensor":{{"array":"x","dtype":"float32","shape":{shape}}}}}"#);
    let t = Tensor::from_vec([4], vec![1.0f32; 4]).unwrap();
    let good = npy::to_bytes(&t).unwrap();
    archive(&path, &[json_member(&meta_with("", &value("[4]"))), ("x", good.clone(), false)]);
    assert!(Trace::load(&path).is_ok());
    archive(&path, &[json_member(&meta_with("", &value("[5]"))), ("x", good.clone(), false)]);
    let e = load_err(&path);
    assert!(e.contains(r#"array "x" is float32(4,), the trace says float32(5,) (value result)"#), "{e}");
    // A header declaring more elements than the data holds.
    let mut lying = good.clone();
    let at = lying.windows(4).position(|w| w == b"(4,)").unwrap();
    lying[at + 1] = b'9';
    archive(&path, &[json_member(&meta_with("", &value("[9]"))), ("x", lying, false)]);
    let e = load_err(&path);
    assert!(e.contains(r#"array "x": "#) && e.contains("needs 36 bytes of data, found 16"), "{e}");
    // A missing array, a dangling `same`.
    archive(&path, &[json_member(&meta_with("", &value("[4]")))]);
    assert!(load_err(&path).contains(r#"array "x""#), "{}", load_err(&path));
    archive(&path, &[json_member(&meta_with("", r#"{"same":"step0.result"}"#))]);
    assert!(load_err(&path).contains(r#"value result: refers to tuple "step0.result""#), "{}", load_err(&path));
    // Inconsistent counts are refused, naming the field.
    let json = meta_with(
        r#"{"index":0,"function":"main","pc":0,"callee":"f","depth":0,"end":0,"failed":false,"values":null}"#,
        r#""null""#,
    );
    archive(&path, &[json_member(&json)]);
    assert!(load_err(&path).contains("__trace__: step at position 0 (index 0), field end"), "{}", load_err(&path));
    let json = json.replace(r#""skipped":0"#, r#""skipped":18446744073709551615"#);
    archive(&path, &[json_member(&json)]);
    assert!(load_err(&path).contains("more steps than can be counted"), "{}", load_err(&path));
}
