//! The paged KV cache's argument checks, one whole-text row per argument and way to break it:
//! create's kernel arguments (a backend other than "tirx", a tuple of another form) and each
//! tensor of self-attention and fused-QKV attention (dtype, shape, contiguity, read-only). The
//! cache and its stand-in kernels are kv_errors.rs's.

use crate::common::{shape, tensor};
use crate::kv_errors::{create, create_args, frozen, func, i, ok, s, with, zeros, Check, CREATE};
use relaxvm::{DataType, Storage, Tensor, Value};

/// Each kernel argument of create (15..=22) given a backend other than "tirx", or a tuple of
/// another form: the message names the argument and its kernel (one row each, the whole text).
#[test]
fn create_refuses_each_kernel_argument_by_name() {
    let n = |m: &str| format!("{CREATE}: {m}");
    let cuda = Value::tuple(vec![s("cuda"), func()]);
    let pair = Value::tuple(vec![i(1), i(2)]);
    let rows: &[(usize, &Value, &str)] = &[
        (15, &cuda, "argument 15 (ragged prefill): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (16, &cuda, "argument 16 (paged prefill): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (16, &pair, "argument 16 (paged prefill): expected (\"tirx\", function) or (), found (1, 2)"),
        (17, &cuda, "argument 17 (paged decode): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (17, &pair, "argument 17 (paged decode): expected (\"tirx\", function) or (), found (1, 2)"),
        (18, &cuda, "argument 18 (sliding-window prefill): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (18, &pair, "argument 18 (sliding-window prefill): expected (\"tirx\", function) or (), found (1, 2)"),
        (19, &cuda, "argument 19 (sliding-window decode): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (19, &pair, "argument 19 (sliding-window decode): expected (\"tirx\", function) or (), found (1, 2)"),
        (20, &cuda, "argument 20 (tree-mask prefill with paged KV): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (20, &pair, "argument 20 (tree-mask prefill with paged KV): expected (\"tirx\", function) or (), found (1, 2)"),
        (21, &cuda, "argument 21 (tree-mask ragged prefill): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (21, &pair, "argument 21 (tree-mask ragged prefill): expected (\"tirx\", function) or (), found (1, 2)"),
        (22, &cuda, "argument 22 (MLA prefill): backend \"cuda\" is not supported on the CPU (expected \"tirx\")"),
        (22, &pair, "argument 22 (MLA prefill): expected (\"tirx\", function) or (), found (1, 2)"),
    ];
    let mut check = Check::default();
    for (k, v, want) in rows {
        check.err(CREATE, &with(&[(*k, (*v).clone())]), &n(want));
    }
    check.done();
}

/// A float32 tensor of `dims` laid out with `strides` (not contiguous), over `len` elements.
fn strided(dims: &[i64], strides: &[i64], len: usize) -> Value {
    let t =
        Tensor::from_parts(Storage::from_vec(vec![0f32; len]), 0, dims.into(), Some(strides.to_vec()), DataType::F32);
    Value::Tensor(t.unwrap())
}

/// Each tensor argument of self-attention (q, k, v, output, lse) and fused-QKV attention broken
/// one way at a time: another dtype, another shape, not contiguous, read-only. One row each, the
/// whole message naming the argument.
#[test]
fn each_attention_tensor_is_checked_by_name() {
    let name = "vm.builtin.attention_kv_cache_self_attention";
    let fused = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
    let c = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    ok("vm.builtin.kv_state_begin_forward", &[c.clone(), shape(&[0]), shape(&[3])]);
    // The step has 3 tokens: q and output (3, 4, 8), k and v (3, 2, 8), lse (3, 4).
    let good = [zeros(&[3, 4, 8]), zeros(&[3, 2, 8]), zeros(&[3, 2, 8]), zeros(&[3, 4, 8]), zeros(&[3, 4])];
    let f64s = |dims: &[i64]| tensor(dims, vec![0f64; dims.iter().product::<i64>() as usize]);
    // (argument position among q, k, v, output, lse; the value; the message).
    let rows: Vec<(usize, Value, &str)> = vec![
        (0, f64s(&[3, 4, 8]), "q: expected dtype float32, found float64"),
        (0, zeros(&[2, 4, 8]), "q: expected shape (3, 4, 8), found (2, 4, 8)"),
        (0, strided(&[3, 4, 8], &[1, 3, 12], 96), "q: expected a contiguous tensor, found strides [1, 3, 12]"),
        (1, f64s(&[3, 2, 8]), "k: expected dtype float32, found float64"),
        (1, zeros(&[3, 4, 8]), "k: expected shape (3, 2, 8), found (3, 4, 8)"),
        (1, strided(&[3, 2, 8], &[1, 3, 6], 48), "k: expected a contiguous tensor, found strides [1, 3, 6]"),
        (2, zeros(&[3, 2, 4]), "v: expected shape (3, 2, 8), found (3, 2, 4)"),
        (3, f64s(&[3, 4, 8]), "output: expected dtype float32, found float64"),
        (3, zeros(&[3, 4]), "output: expected shape (3, 4, 8), found (3, 4)"),
        (3, strided(&[3, 4, 8], &[1, 3, 12], 96), "output: expected a contiguous tensor, found strides [1, 3, 12]"),
        (4, f64s(&[3, 4]), "lse: expected dtype float32, found float64"),
        (4, zeros(&[4, 3]), "lse: expected shape (3, 4), found (4, 3)"),
        (4, strided(&[3, 4], &[1, 3], 12), "lse: expected a contiguous tensor, found strides [1, 3]"),
        (4, frozen(&[3, 4]), "lse: expected a writable tensor, found read-only memory"),
    ];
    let mut check = Check::default();
    for (k, v, want) in rows {
        let mut args = vec![c.clone(), i(0), Value::Float(0.5)];
        args.extend(good.iter().cloned());
        args[3 + k] = v;
        check.err(name, &args, &format!("{name}: {want}"));
    }
    check.err(
        fused,
        &[c.clone(), i(0), Value::Float(0.5), zeros(&[3, 4, 8]), zeros(&[3, 4, 8])],
        &format!("{fused}: qkv: expected shape (_, 8, 8), found (3, 4, 8)"),
    );
    // Fused QKV's own output checks (errs/02): qkv (3, 8, 8) is right, the output is not.
    let fused_rows: Vec<(Value, &str)> = vec![
        (f64s(&[3, 4, 8]), "output: expected dtype float32, found float64"),
        (zeros(&[3, 4]), "output: expected shape (3, 4, 8), found (3, 4)"),
        (strided(&[3, 4, 8], &[1, 3, 12], 96), "output: expected a contiguous tensor, found strides [1, 3, 12]"),
    ];
    for (o, want) in fused_rows {
        check.err(fused, &[c.clone(), i(0), Value::Float(0.5), zeros(&[3, 8, 8]), o], &format!("{fused}: {want}"));
    }
    ok("vm.builtin.kv_state_end_forward", std::slice::from_ref(&c));
    check.done();
}
