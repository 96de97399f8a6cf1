//! The rows of the language-model builtins: the legacy KV cache and the sampling and logit
//! builtins (see the parent module).

use super::{f, i, x23, zero_dim, Kind, Want};
use crate::common::{call, shape, tensor};
use relaxvm::Value;
use Want::{Err as E, Ok as K};

pub(super) fn cases() -> Vec<(&'static str, Vec<Value>, Want)> {
    let cache = call("vm.builtin.attention_kv_cache_create", &[tensor(&[1, 2], vec![1i32, 2]), shape(&[1, 2]), i(-1)])
        .expect("a cache");
    let row = |a: i32| tensor(&[1, 2], vec![a, a]);
    let caches = Value::tuple(vec![cache.clone()]);
    let logits = || tensor(&[1, 4], vec![0.5f32, 2.0, -1.0, 2.0]);
    let prob = || tensor(&[4], vec![0.1f32, 0.4, 0.2, 0.3]);
    let ids = || tensor(&[2], vec![1i32, 2]);
    // The in-place builtins return null; a `vm.builtin.copy` row after each reads the logits.
    let penalised = tensor(&[4], vec![1.0f32, 2.0, -2.0, 0.0]);
    let softened = tensor(&[2], vec![0.0f32, 0.0]);
    vec![
        (
            "vm.builtin.attention_kv_cache_append",
            vec![cache.clone(), row(3)],
            K("<relax.vm.AttentionKVCacheLegacy dtype=int32, reserved=(2, 2), fill_count=2, window_pos=0>"),
        ),
        (
            "vm.builtin.attention_kv_cache_append",
            vec![cache.clone(), tensor(&[1, 3], vec![0i32; 3])],
            E(Kind::Value, &["(n, 2)", "(1, 3)"]),
        ),
        ("vm.builtin.attention_kv_cache_view", vec![cache.clone()], K("int32 (2, 2) [1, 2, 3, 3]")),
        (
            "vm.builtin.attention_kv_cache_view",
            vec![cache.clone(), shape(&[3, 2])],
            E(Kind::Value, &["filled count 2"]),
        ),
        (
            "vm.builtin.attention_kv_cache_update",
            vec![cache.clone(), tensor(&[2, 2], vec![4i32, 4, 5, 5])],
            K("<relax.vm.AttentionKVCacheLegacy dtype=int32, reserved=(2, 2), fill_count=2, window_pos=0>"),
        ),
        ("vm.builtin.attention_kv_cache_update", vec![cache.clone(), row(0)], E(Kind::Value, &["2 rows", "found 1"])),
        // The window position is still 0 (a fill count of -1 at creation leaves it): writes go to
        // rows 0, then 1; the grown third row was never written (zeros here, unset in TVM).
        (
            "vm.builtin.attention_kv_cache_window_override",
            vec![cache.clone(), row(6), i(3)],
            K("<relax.vm.AttentionKVCacheLegacy dtype=int32, reserved=(4, 2), fill_count=3, window_pos=1>"),
        ),
        (
            "vm.builtin.attention_kv_cache_window_override",
            vec![cache.clone(), tensor(&[4, 2], vec![0i32; 8]), i(3)],
            E(Kind::Value, &["at most", "found 4"]),
        ),
        (
            "vm.builtin.attention_kv_cache_window_override_with_sinks",
            vec![cache.clone(), row(7), i(3), i(1)],
            K("<relax.vm.AttentionKVCacheLegacy dtype=int32, reserved=(4, 2), fill_count=3, window_pos=2>"),
        ),
        (
            "vm.builtin.attention_kv_cache_window_override_with_sinks",
            vec![cache.clone(), row(7), i(3), i(4)],
            E(Kind::Value, &["num_attention_sinks"]),
        ),
        ("vm.builtin.attention_kv_cache_view", vec![cache.clone()], K("int32 (3, 2) [6, 6, 7, 7, 0, 0]")),
        ("vm.builtin.attention_kv_cache_array_popn", vec![caches.clone(), i(1)], K("None")),
        (
            "vm.builtin.attention_kv_cache_array_popn",
            vec![caches.clone(), i(3)],
            E(Kind::Value, &["0 to 2", "asked 3"]),
        ),
        ("vm.builtin.attention_kv_cache_array_clear", vec![caches], K("None")),
        (
            "vm.builtin.attention_kv_cache_array_clear",
            vec![Value::tuple(vec![i(1)])],
            E(Kind::Type, &["attention_kv_cache (legacy)", "int"]),
        ),
        (
            "vm.builtin.attention_kv_cache_create",
            vec![row(1), shape(&[2, 2]), i(0)],
            K("<relax.vm.AttentionKVCacheLegacy dtype=int32, reserved=(2, 2), fill_count=0, window_pos=0>"),
        ),
        (
            "vm.builtin.attention_kv_cache_create",
            vec![row(1), shape(&[0, 2]), i(0)],
            E(Kind::Value, &["at least 1", "found 0"]),
        ),
        // Logits [0.5, 2, -1, 2]: greedy takes the first 2.0 libstdc++'s sort leaves first.
        ("vm.builtin.sample_top_p_from_logits", vec![logits(), f(0.0), f(0.9), f(0.5)], K("1")),
        (
            "vm.builtin.sample_top_p_from_logits",
            vec![x23(), f(1.0), f(0.9), f(0.5)],
            E(Kind::Value, &["leading dimensions", "(2, 3)"]),
        ),
        ("vm.builtin.sample_top_p_from_prob", vec![prob(), f(0.5), f(0.1)], K("1")),
        ("vm.builtin.sample_top_p_from_prob", vec![zero_dim(), f(0.5), f(0.1)], E(Kind::Type, &["float32", "int32"])),
        (
            "vm.builtin.multinomial_from_uniform",
            vec![tensor(&[1, 4], vec![0.1f32, 0.4, 0.2, 0.3]), tensor(&[1, 1], vec![0.45f32])],
            K("int64 (1, 1) [1]"),
        ),
        (
            "vm.builtin.multinomial_from_uniform",
            vec![tensor(&[1, 4], vec![0.1f32, 0.4, 0.2, 0.3]), tensor(&[1, 1], vec![0.45f64])],
            E(Kind::Type, &["float32", "float64"]),
        ),
        ("vm.builtin.apply_repetition_penalty", vec![penalised.clone(), ids(), f(2.0)], K("None")),
        ("vm.builtin.copy", vec![penalised.clone()], K("float32 (4,) [1, 1, -4, 0]")),
        (
            "vm.builtin.apply_repetition_penalty",
            vec![penalised.clone(), tensor(&[1], vec![4i32]), f(2.0)],
            E(Kind::Value, &["token_ids[0] = 4"]),
        ),
        (
            "vm.builtin.apply_presence_and_frequency_penalty",
            vec![penalised.clone(), ids(), tensor(&[2], vec![1i32, 2]), f(0.5), f(0.25)],
            K("None"),
        ),
        ("vm.builtin.copy", vec![penalised.clone()], K("float32 (4,) [1, 0.25, -5, 0]")),
        (
            "vm.builtin.apply_presence_and_frequency_penalty",
            vec![penalised, ids(), tensor(&[3], vec![1i32; 3]), f(0.5), f(0.25)],
            E(Kind::Value, &["token_freqs", "(3,)"]),
        ),
        ("vm.builtin.apply_softmax_with_temperature", vec![softened.clone(), f(1.0)], K("None")),
        ("vm.builtin.copy", vec![softened], K("float32 (2,) [0.5, 0.5]")),
        ("vm.builtin.apply_softmax_with_temperature", vec![zero_dim(), f(1.0)], E(Kind::Type, &["float32"])),
    ]
}
