//! Refusals of the language-model builtins, each with its whole message: the legacy KV cache
//! (create, append, update, view, windows, pops) and the sampling and logit builtins (shapes,
//! empty vocabularies, distributions nothing can be sampled from, in-place writes).

use crate::common::{call, shape, tensor};
use relaxvm::{DataType, ErrorKind, Storage, Tensor, Value};

fn i(v: i64) -> Value {
    Value::Int(v)
}

fn f(v: f64) -> Value {
    Value::Float(v)
}

fn rows(n: usize) -> Value {
    tensor(&[n as i64, 2], vec![1i32; 2 * n])
}

/// Collects each call that does not fail with a value error of exactly `want`.
#[derive(Default)]
struct Check(Vec<String>);

impl Check {
    fn err(&mut self, name: &str, args: &[Value], want: &str) {
        match call(name, args) {
            Ok(v) => self.0.push(format!("{name}: returned {v:?}, expected: {want}")),
            Err(e) if e.to_string() != want || !matches!(e.root().kind(), ErrorKind::Value(_)) => {
                self.0.push(format!("{name}\n  expected {want}\n  found    {e} ({:?})", e.root().kind()))
            }
            Err(_) => {}
        }
    }

    fn done(self) {
        assert!(self.0.is_empty(), "{}", self.0.join("\n"));
    }
}

#[test]
fn the_legacy_kv_cache() {
    let create = "vm.builtin.attention_kv_cache_create";
    let mut check = Check::default();
    let n = |name: &str, op: &str, m: &str| format!("{name}: attention_kv_cache {op}: {m}");
    check.err(
        create,
        &[rows(1), shape(&[]), i(-1)],
        &n(create, "create", concat!("the reserved shape needs at ", "least one dimension (the token axis), found ()")),
    );
    check.err(
        create,
        &[rows(1), shape(&[0, 2]), i(-1)],
        &n(
            create,
            "create",
            "the reserved shape's first dimension must be at least 1 (the cache doubles it to grow), found 0",
        ),
    );
    check.err(
        create,
        &[rows(1), shape(&[2, 2]), i(5)],
        &format!("{create}: attention_kv_cache create: init_fill_count must be at most the 2 rows reserved, found 5"),
    );
    check.err(
        create,
        &[rows(1), shape(&[2, 2]), i(1 << 40)],
        &format!("{create}: init_fill_count must fit in int32, found 1099511627776"),
    );

    let c = call(create, &[rows(2), shape(&[2, 2]), i(-1)]).unwrap();
    let append = "vm.builtin.attention_kv_cache_append";
    check.err(
        append,
        &[c.clone(), tensor(&[1, 2], vec![1f32, 2.0])],
        &n(append, "append", "expected a value of dtype int32 (the cache's), found float32"),
    );
    check.err(
        append,
        &[c.clone(), tensor(&[1, 3], vec![1i32; 3])],
        &format!("{append}: attention_kv_cache append: expected a value of shape (n, 2), found (1, 3)"),
    );
    let update = "vm.builtin.attention_kv_cache_update";
    check.err(
        update,
        &[c.clone(), rows(1)],
        &format!("{update}: attention_kv_cache update: the value must have the 2 rows filled, found 1"),
    );
    let view = "vm.builtin.attention_kv_cache_view";
    check.err(
        view,
        &[c.clone(), shape(&[3, 2])],
        &n(view, "view", "the requested shape (3, 2) must start with the filled count 2"),
    );
    check.err(
        view,
        &[c.clone(), shape(&[2, 3])],
        &n(view, "view", "dimension 1 of the requested shape (2, 3) must be 2 (the cache's (2, 2))"),
    );
    let sinks = "vm.builtin.attention_kv_cache_window_override_with_sinks";
    check.err(
        sinks,
        &[c.clone(), rows(1), i(4), i(5)],
        &n(sinks, "window_override", "num_attention_sinks must be in 0..=4, found 5"),
    );
    let window = "vm.builtin.attention_kv_cache_window_override";
    check.err(
        window,
        &[c.clone(), rows(3), i(2)],
        &n(
            window,
            "window_override",
            "the value may have at most max_cache_size - num_attention_sinks = 2 rows, found 3",
        ),
    );
    let popn = "vm.builtin.attention_kv_cache_array_popn";
    check.err(
        popn,
        &[Value::tuple(vec![c.clone()]), i(5)],
        &format!("{popn}: cache 0: attention_kv_cache array_popn: can remove 0 to 2 entries (the fill count), asked 5"),
    );

    // Fill count and window position 4; a window of 2 cannot hold that position.
    let full = call(create, &[rows(4), shape(&[4, 2]), i(4)]).unwrap();
    check.err(
        window,
        &[full.clone(), rows(1), i(2)],
        &n(window, "window_override", "the window position 4 is past max_cache_size 2"),
    );
    // Three popped: fill count 1, position 4; writing past the window's end needs it full.
    call(popn, &[Value::tuple(vec![full.clone()]), i(3)]).unwrap();
    check.err(
        window,
        &[full, rows(1), i(4)],
        &n(
            window,
            "window_override",
            "wrapping around needs a full window at its end: fill count 2 and position 4 must both be max_cache_size 4",
        ),
    );
    check.done();
}

#[test]
fn sampling_and_logits() {
    let mut check = Check::default();
    let n = |name: &str, m: &str| format!("{name}: {m}");
    let logits = "vm.builtin.sample_top_p_from_logits";
    let prob = "vm.builtin.sample_top_p_from_prob";
    let multinomial = "vm.builtin.multinomial_from_uniform";
    let f32s = |dims: &[i64], v: f32| tensor(dims, vec![v; dims.iter().product::<i64>() as usize]);
    check.err(
        logits,
        &[f32s(&[1, 0], 0.0), f(1.0), f(0.9), f(0.5)],
        &n(logits, "cannot sample from empty logits (TVM reads the first of none)"),
    );
    check.err(
        logits,
        &[f32s(&[], 0.0), f(1.0), f(0.9), f(0.5)],
        // Split so that the coverage check does not take the first words for the TVM reader's
        // count message (which shares them).
        &n(logits, concat!("logits needs at ", "least one dimension, found a 0-d tensor")),
    );
    check.err(
        logits,
        &[f32s(&[2, 4], 0.0), f(1.0), f(0.9), f(0.5)],
        &n(logits, "the leading dimensions of logits must be 1 (one row), found shape (2, 4)"),
    );
    check.err(
        logits,
        &[f32s(&[1, 4], 0.0), f(1.0), f(1.0), f(2.0)],
        &n(logits, "no token was sampled: uniform_sample 2 must be at most the first cumulative probability 0.25 (TVM's check)"),
    );
    check.err(
        prob,
        &[f32s(&[4], f32::NAN), f(1.0), f(0.5)],
        &n(prob, "The output probabilities are all NaNs, can not sample from it"),
    );
    check.err(
        prob,
        &[f32s(&[4], -1.0), f(1.0), f(0.5)],
        &n(prob, "Cannot sample from the given probability distribution: no probability is at least 0"),
    );
    check.err(
        multinomial,
        &[f32s(&[4], 0.25), f32s(&[1], 0.5)],
        &n(multinomial, "prob must be (batch, vocab) (TVM reads batch * vocab elements of it), found shape (4,)"),
    );
    check.err(
        multinomial,
        &[f32s(&[1, 4], 0.25), f32s(&[3], 0.5)],
        &n(multinomial, "uniform_samples must hold one sample per row of prob (1), found shape (3,)"),
    );
    check.err(
        multinomial,
        &[f32s(&[1, 0], 0.0), f32s(&[1], 0.5)],
        &n(multinomial, "cannot sample from an empty vocabulary (TVM returns index 0 of none)"),
    );
    let presence = "vm.builtin.apply_presence_and_frequency_penalty";
    let ids = tensor(&[2], vec![1i32, 2]);
    check.err(
        presence,
        &[f32s(&[4], 0.0), ids, tensor(&[3], vec![1i32; 3]), f(0.5), f(0.5)],
        &n(presence, "token_freqs must have the shape of token_ids (2,), found (3,)"),
    );
    // Every other float of 8: a view the builtin cannot write in place.
    let strided =
        Tensor::from_parts(Storage::from_vec(vec![0f32; 8]), 0, [1, 4].into(), Some(vec![8, 2]), DataType::F32)
            .unwrap();
    let softmax = "vm.builtin.apply_softmax_with_temperature";
    check.err(
        softmax,
        &[Value::Tensor(strided), f(1.0)],
        &n(softmax, "logits must be contiguous (it is written in place)"),
    );
    check.done();
}

/// Each tensor argument of the sampling and logit builtins given a 0-d tensor, and each one-row
/// argument given two rows: the message names the builtin and the argument (one row each).
#[test]
fn each_tensor_argument_needs_its_dimensions() {
    let scalar = tensor(&[], vec![0f32]);
    let scalar_ids = tensor(&[], vec![0i32]);
    let logits = tensor(&[4], vec![0f32; 4]);
    let ids = tensor(&[1], vec![0i32]);
    let prob = tensor(&[1, 4], vec![0.25f32; 4]);
    let two_rows = tensor(&[2, 4], vec![0.25f32; 8]);
    let rows: Vec<(&str, Vec<Value>, &str)> = vec![
        (
            "vm.builtin.apply_repetition_penalty",
            vec![scalar.clone(), ids.clone(), f(1.0)],
            "vm.builtin.apply_repetition_penalty: logits needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.apply_repetition_penalty",
            vec![logits.clone(), scalar_ids.clone(), f(1.0)],
            "vm.builtin.apply_repetition_penalty: token_ids needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.apply_repetition_penalty",
            vec![logits.clone(), tensor(&[2, 1], vec![0i32; 2]), f(1.0)],
            "vm.builtin.apply_repetition_penalty: the leading dimensions of token_ids must be 1 (one row), found shape (2, 1)",
        ),
        (
            "vm.builtin.apply_presence_and_frequency_penalty",
            vec![scalar.clone(), ids.clone(), ids.clone(), f(0.0), f(0.0)],
            "vm.builtin.apply_presence_and_frequency_penalty: logits needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.apply_presence_and_frequency_penalty",
            vec![logits.clone(), ids.clone(), scalar_ids.clone(), f(0.0), f(0.0)],
            "vm.builtin.apply_presence_and_frequency_penalty: token_freqs needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.apply_softmax_with_temperature",
            vec![scalar.clone(), f(1.0)],
            "vm.builtin.apply_softmax_with_temperature: logits needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.multinomial_from_uniform",
            vec![scalar.clone(), tensor(&[1, 1], vec![0.5f32])],
            "vm.builtin.multinomial_from_uniform: prob needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.multinomial_from_uniform",
            vec![prob.clone(), scalar.clone()],
            "vm.builtin.multinomial_from_uniform: uniform_samples needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.sample_top_p_from_logits",
            vec![scalar.clone(), f(1.0), f(0.9), f(0.5)],
            "vm.builtin.sample_top_p_from_logits: logits needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.sample_top_p_from_prob",
            vec![scalar.clone(), f(0.9), f(0.5)],
            "vm.builtin.sample_top_p_from_prob: prob needs at least one dimension, found a 0-d tensor",
        ),
        (
            "vm.builtin.sample_top_p_from_prob",
            vec![two_rows, f(0.9), f(0.5)],
            "vm.builtin.sample_top_p_from_prob: the leading dimensions of prob must be 1 (one row), found shape (2, 4)",
        ),
    ];
    let mut check = Check::default();
    for (name, args, want) in &rows {
        check.err(name, args, want);
    }
    // Each builtin that writes logits in place refuses a strided view, and softmax two rows
    // (errs/02: one check per builtin, each caused).
    let strided = Tensor::from_parts(Storage::from_vec(vec![0f32; 8]), 0, [4].into(), Some(vec![2]), DataType::F32);
    let strided = Value::Tensor(strided.unwrap());
    check.err(
        "vm.builtin.apply_repetition_penalty",
        &[strided.clone(), ids.clone(), f(1.0)],
        "vm.builtin.apply_repetition_penalty: logits must be contiguous (it is written in place)",
    );
    check.err(
        "vm.builtin.apply_presence_and_frequency_penalty",
        &[strided, ids.clone(), ids.clone(), f(0.0), f(0.0)],
        "vm.builtin.apply_presence_and_frequency_penalty: logits must be contiguous (it is written in place)",
    );
    check.err(
        "vm.builtin.apply_softmax_with_temperature",
        &[tensor(&[2, 4], vec![0f32; 8]), f(1.0)],
        "vm.builtin.apply_softmax_with_temperature: the leading dimensions of logits must be 1 (one row), found shape (2, 4)",
    );
    check.done();
}
