//! The paged KV cache's checkpoint refusals, each with its whole message: caches and sequences
//! checkpoints do not support, metadata that does not describe this cache, and imports out of
//! order. The metadata is the cache's own (an empty sequence 0), changed one field at a time.

use crate::common::{call, shape, tensor};
use relaxvm::{ErrorKind, PackedFunc, Value};

const CREATE: &str = "vm.builtin.paged_attention_kv_cache_create";
const META: &str = "vm.builtin.attention_kv_cache_get_checkpoint_metadata";
const PREPARE: &str = "vm.builtin.attention_kv_cache_prepare_import";
const IMPORT: &str = "vm.builtin.attention_kv_cache_import_page_group";
const FINISH: &str = "vm.builtin.attention_kv_cache_finish_import";

fn i(v: i64) -> Value {
    Value::Int(v)
}

fn func() -> Value {
    Value::packed(PackedFunc::from_fn("test.kernel", |_| Ok(Value::Null)))
}

fn zeros(dims: &[i64]) -> Value {
    tensor(dims, vec![0f32; dims.iter().product::<i64>() as usize])
}

/// A cache of 2 layers, 2 KV heads of dim 8, pages of 16 tokens (5 of them), float32;
/// `config`'s last field turns on sliding windows; `changes` replace arguments.
fn cache(config: &[i64], changes: &[(usize, Value)]) -> Value {
    let tirx = || Value::tuple(vec![Value::str("tirx"), func()]);
    let mut args = vec![shape(config), shape(&[0, 2]), i(4), i(2), i(8), i(8), shape(&[0, 0]), Value::Bool(false)];
    args.extend([i(1), Value::Float(1.0), Value::Float(10000.0), Value::Null, tensor(&[], vec![0f32]), func()]);
    args.push(Value::Null);
    args.extend((0..7).map(|_| tirx()));
    args.push(Value::tuple(vec![]));
    args.push(Value::tuple(vec![func()]));
    args.extend((0..4).map(|_| func()));
    for (k, v) in changes {
        args[*k] = v.clone();
    }
    let c = call(CREATE, &args).unwrap();
    call("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]).unwrap();
    c
}

/// Calls `name`, which must fail with a value error whose message is `name: want`.
fn refused(wrong: &mut Vec<String>, name: &str, args: &[Value], want: &str) {
    let want = format!("{name}: {want}");
    match call(name, args) {
        Ok(v) => wrong.push(format!("{name}: returned {v:?}, expected: {want}")),
        Err(e) if e.to_string() != want || !matches!(e.root().kind(), ErrorKind::Value(_)) => {
            wrong.push(format!("{name}\n  expected {want}\n  found    {e}"))
        }
        Err(_) => {}
    }
}

#[test]
fn caches_and_sequences_checkpoints_do_not_support() {
    let mut wrong = Vec::new();
    let base = [4, 64, 16, 16, 0];
    refused(&mut wrong, META, &[cache(&base, &[]), i(1)], "checkpoints support sequence id 0 only, found 1");
    refused(
        &mut wrong,
        META,
        &[cache(&base, &[(11, zeros(&[4]))]), i(0)],
        "checkpoints do not support RoPE extension factors",
    );
    refused(
        &mut wrong,
        META,
        &[cache(&[4, 64, 16, 16, 1], &[]), i(0)],
        "checkpoints do not support sliding-window caches",
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn metadata_that_does_not_describe_this_cache() {
    let c = cache(&[4, 64, 16, 16, 0], &[]);
    let meta = call(META, &[c.clone(), i(0)]).unwrap().as_str().unwrap().to_string();
    let changed = |from: &str, to: &str| {
        assert!(meta.contains(from), "{from} in {meta}");
        Value::str(&meta.replacen(from, to, 1))
    };
    let one_group = Value::str(&format!("{}]}}", &meta[..meta.find(r#",{"group_index":1"#).unwrap()]));
    // The metadata with the integer field `k` set to 0.
    let zeroed = |k: &str| {
        let key = format!("{k:?}:");
        let at = meta.find(&key).unwrap_or_else(|| panic!("{key} in {meta}")) + key.len();
        let end = at + meta[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
        Value::str(&format!("{}0{}", &meta[..at], &meta[end..]))
    };
    let mut wrong = Vec::new();
    let cases = [
        (
            changed(r#""page_size":16"#, r#""page_size":32"#),
            r#"checkpoint metadata field "page_size": expected 16, found 32"#,
        ),
        (changed(r#""seq_length":0"#, r#""seq_length":1"#), "seq_length 1 needs 1 logical pages, the metadata has 0"),
        (
            changed(r#""seq_length":0"#, r#""seq_length":100"#),
            "the checkpoint needs 7 pages; its source cache or this one (5 pages) has fewer",
        ),
        (one_group, "expected 2 page groups, the metadata has 1"),
        (zeroed("reserved_num_seqs"), r#"checkpoint metadata field "reserved_num_seqs" must be positive"#),
        (zeroed("prefill_chunk_size"), r#"checkpoint metadata field "prefill_chunk_size" must be positive"#),
        (
            changed(r#""num_logical_pages":0,"dtype":"float32""#, r#""num_logical_pages":0,"dtype":"float16""#),
            "page group 0: dtype does not match float32",
        ),
    ];
    for (text, want) in cases {
        refused(&mut wrong, PREPARE, &[c.clone(), i(0), text], want);
    }
    refused(
        &mut wrong,
        PREPARE,
        &[c.clone(), i(1), Value::str(&meta)],
        "checkpoint imports support sequence id 0 only, found 1",
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn imports_out_of_order() {
    let c = cache(&[4, 64, 16, 16, 0], &[]);
    let meta = call(META, &[c.clone(), i(0)]).unwrap();
    let group = || zeros(&[1, 0, 2, 2, 16, 8]);
    let mut wrong = Vec::new();
    refused(
        &mut wrong,
        IMPORT,
        &[c.clone(), i(0), i(0), group()],
        "no checkpoint import in progress: call prepare_import first",
    );
    call(PREPARE, &[c.clone(), i(0), meta]).unwrap();
    refused(
        &mut wrong,
        "vm.builtin.kv_state_begin_forward",
        &[c.clone(), shape(&[0]), shape(&[1])],
        "a checkpoint import is in progress: finish it before a forward step",
    );
    refused(
        &mut wrong,
        "vm.builtin.attention_kv_cache_get_sequence_length",
        &[c.clone(), i(0)],
        "sequence lengths are unavailable until the checkpoint import is finished",
    );
    refused(&mut wrong, META, &[c.clone(), i(0)], "a checkpoint import is in progress: finish it first");
    refused(&mut wrong, IMPORT, &[c.clone(), i(0), i(5), group()], "group 5 is out of range: expected 0 to 1");
    call(IMPORT, &[c.clone(), i(0), i(0), group()]).unwrap();
    refused(&mut wrong, IMPORT, &[c.clone(), i(0), i(0), group()], "checkpoint group 0 was already imported");
    refused(&mut wrong, FINISH, &[c.clone(), i(0)], "the checkpoint import is missing group 1");
    let e = call(PREPARE, &[c.clone(), i(0), i(5)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Type { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("type mismatch: expected str as argument 2 (metadata_json) of {PREPARE}, found int 5")
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A float32 tensor of `dims` laid out with `strides` (not contiguous), over `len` elements.
fn strided(dims: &[i64], strides: &[i64], len: usize) -> Value {
    let storage = relaxvm::Storage::from_vec(vec![0f32; len]);
    let t = relaxvm::Tensor::from_parts(storage, 0, dims.into(), Some(strides.to_vec()), relaxvm::DataType::F32);
    Value::Tensor(t.unwrap())
}

/// The page-group tensors of export (dst) and import (src) broken one way at a time, for a
/// sequence of 3 tokens (one page): one row each, the whole message naming the argument.
#[test]
fn each_page_group_tensor_is_checked_by_name() {
    let export = "vm.builtin.attention_kv_cache_export_page_group";
    let c = cache(&[4, 64, 16, 16, 0], &[]);
    call("vm.builtin.kv_state_begin_forward", &[c.clone(), shape(&[0]), shape(&[3])]).unwrap();
    call("vm.builtin.kv_state_end_forward", std::slice::from_ref(&c)).unwrap();
    let meta = call(META, &[c.clone(), i(0)]).unwrap();
    // One page group: (1, pages, K and V, heads, page size, head dim).
    let dims = [1, 1, 2, 2, 16, 8];
    let swapped = strided(&dims, &[512, 512, 256, 128, 1, 16], 512);
    let frozen = zeros(&dims);
    frozen.as_tensor().unwrap().storage().freeze();
    let mut wrong = Vec::new();
    refused(
        &mut wrong,
        export,
        &[c.clone(), i(0), i(0), swapped.clone()],
        "dst: expected a contiguous tensor, found strides [512, 512, 256, 128, 1, 16]",
    );
    refused(
        &mut wrong,
        export,
        &[c.clone(), i(0), i(0), frozen],
        "dst: expected a writable tensor, found read-only memory",
    );
    call(PREPARE, &[c.clone(), i(0), meta]).unwrap();
    let f64s = tensor(&dims, vec![0f64; 512]);
    refused(&mut wrong, IMPORT, &[c.clone(), i(0), i(0), f64s], "src: expected dtype float32, found float64");
    refused(
        &mut wrong,
        IMPORT,
        &[c.clone(), i(0), i(0), zeros(&[1, 2, 2, 2, 16, 8])],
        "src: expected shape (1, 1, 2, 2, 16, 8), found (1, 2, 2, 2, 16, 8)",
    );
    refused(
        &mut wrong,
        IMPORT,
        &[c.clone(), i(0), i(0), swapped],
        "src: expected a contiguous tensor, found strides [512, 512, 256, 128, 1, 16]",
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
