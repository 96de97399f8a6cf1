//! The legacy cache through its packed functions: TVM's behaviour on valid calls, and refused
//! calls that leave the cache as it was.

use super::{as_cache, BUILTINS};
use crate::table::call;
use relaxvm::{Shape, Tensor, Value};

fn t(dims: &[i64], v: Vec<i32>) -> Value {
    Value::Tensor(Tensor::from_vec(Shape::from(dims), v).unwrap())
}

fn shape(d: &[i64]) -> Value {
    Value::Shape(Shape::from(d))
}

fn create(init: Value, reserve: &[i64], fill: i64) -> Value {
    call(BUILTINS, "vm.builtin.attention_kv_cache_create", &[init, shape(reserve), Value::Int(fill)]).unwrap()
}

fn view(c: &Value) -> (Vec<i64>, Vec<i32>) {
    let v = call(BUILTINS, "vm.builtin.attention_kv_cache_view", std::slice::from_ref(c)).unwrap();
    let v = v.as_tensor().unwrap();
    (v.shape().to_vec(), v.to_vec::<i32>().unwrap())
}

fn err(name: &str, args: &[Value]) -> String {
    call(BUILTINS, &format!("vm.builtin.attention_kv_cache_{name}"), args).expect_err("an error").to_string()
}

#[test]
fn append_grows_by_doubling_and_view_shows_the_filled_rows() {
    let c = create(t(&[1, 2], vec![7, 7]), &[1, 2], -1);
    assert_eq!(view(&c), (vec![1, 2], vec![7, 7]));
    for i in 0..3 {
        let r = call(BUILTINS, "vm.builtin.attention_kv_cache_append", &[c.clone(), t(&[1, 2], vec![i, i])]).unwrap();
        assert!(r.same_object(&c));
    }
    assert_eq!(view(&c), (vec![4, 2], vec![7, 7, 0, 0, 1, 1, 2, 2]));
    let cache = as_cache(&c).unwrap();
    assert_eq!(cache.to_string(), "AttentionKVCacheLegacy(dtype=int32, reserved=(4, 2), fill_count=4, window_pos=0)");
    assert_eq!(
        c.to_string(),
        "<relax.vm.AttentionKVCacheLegacy dtype=int32, reserved=(4, 2), fill_count=4, window_pos=0>"
    );
    let with_shape = call(BUILTINS, "vm.builtin.attention_kv_cache_view", &[c.clone(), shape(&[4, 2])]).unwrap();
    assert_eq!(with_shape.as_tensor().unwrap().to_vec::<i32>().unwrap(), [7, 7, 0, 0, 1, 1, 2, 2]);
}

#[test]
fn update_popn_clear() {
    let c = create(t(&[2, 1], vec![1, 2]), &[4, 1], -1);
    call(BUILTINS, "vm.builtin.attention_kv_cache_update", &[c.clone(), t(&[2, 1], vec![5, 6])]).unwrap();
    assert_eq!(view(&c).1, [5, 6]);
    call(BUILTINS, "vm.builtin.attention_kv_cache_array_popn", &[Value::tuple(vec![c.clone()]), Value::Int(1)])
        .unwrap();
    assert_eq!(view(&c), (vec![1, 1], vec![5]));
    call(BUILTINS, "vm.builtin.attention_kv_cache_array_clear", &[Value::tuple(vec![c.clone()])]).unwrap();
    assert_eq!(view(&c), (vec![0, 1], vec![]));
}

#[test]
fn refused_calls_name_expected_and_found_and_change_nothing() {
    let c = create(t(&[2, 2], vec![1, 2, 3, 4]), &[2, 2], -1);
    let before = view(&c);
    let e =
        err("append", &[c.clone(), Value::Tensor(Tensor::from_vec(Shape::from([1, 2]), vec![1.0f32, 2.0]).unwrap())]);
    assert!(e.contains("dtype int32") && e.contains("float32"), "{e}");
    let e = err("append", &[c.clone(), t(&[1, 3], vec![1, 2, 3])]);
    assert!(e.contains("(n, 2)") && e.contains("(1, 3)"), "{e}");
    let e = err("update", &[c.clone(), t(&[1, 2], vec![1, 2])]);
    assert!(e.contains("2 rows") && e.contains("found 1"), "{e}");
    let e = err("view", &[c.clone(), shape(&[3, 2])]);
    assert!(e.contains("filled count 2"), "{e}");
    let e = err("view", &[c.clone(), shape(&[2])]);
    assert!(e.contains("2 dimensions"), "{e}");
    let e = err("append", &[Value::Int(3), t(&[1, 2], vec![1, 2])]);
    assert!(e.contains("attention_kv_cache (legacy)") && e.contains("int"), "{e}");
    // popn past the count, also through a cache listed twice: no cache changes.
    let other = create(t(&[3, 2], vec![0; 6]), &[4, 2], -1);
    let e = err("array_popn", &[Value::tuple(vec![other.clone(), c.clone()]), Value::Int(3)]);
    assert!(e.contains("cache 1") && e.contains("0 to 2") && e.contains("asked 3"), "{e}");
    let e = err("array_popn", &[Value::tuple(vec![c.clone(), c.clone()]), Value::Int(2)]);
    assert!(e.contains("asked 4"), "{e}");
    let e = err("array_popn", &[Value::tuple(vec![c.clone()]), Value::Int(-1)]);
    assert!(e.contains("asked -1"), "{e}");
    let e = err("array_clear", &[Value::tuple(vec![c.clone(), Value::Int(1)])]);
    assert!(e.contains("item 1"), "{e}");
    assert_eq!(view(&other).0, [3, 2]);
    assert_eq!(view(&c), before);
    // The cache still works.
    call(BUILTINS, "vm.builtin.attention_kv_cache_append", &[c.clone(), t(&[1, 2], vec![9, 9])]).unwrap();
    assert_eq!(view(&c).1, [1, 2, 3, 4, 9, 9]);
}

#[test]
fn create_refuses_what_tvm_would_hang_or_read_outside_on() {
    let e = err("create", &[t(&[1, 2], vec![0, 0]), shape(&[0, 2]), Value::Int(0)]);
    assert!(e.contains("at least 1") && e.contains("found 0"), "{e}");
    let e = err("create", &[t(&[1, 2], vec![0, 0]), shape(&[]), Value::Int(0)]);
    assert!(e.contains("at least one dimension"), "{e}");
    let e = err("create", &[t(&[1, 2], vec![0, 0]), shape(&[2, 2]), Value::Int(3)]);
    assert!(e.contains("at most the 2 rows") && e.contains("found 3"), "{e}");
    let e = err("create", &[t(&[1, 2], vec![0, 0]), shape(&[2, 2]), Value::Int(1 << 40)]);
    assert!(e.contains("int32"), "{e}");
}

#[test]
fn window_override_wraps_and_refuses_writes_past_the_reserve() {
    // A window of 4 over 4 reserved rows: 3 rows, then 3 more wrap to row 0.
    let c = create(t(&[4, 1], vec![0; 4]), &[4, 1], 0);
    let w = "vm.builtin.attention_kv_cache_window_override";
    call(BUILTINS, w, &[c.clone(), t(&[3, 1], vec![1, 2, 3]), Value::Int(4)]).unwrap();
    call(BUILTINS, w, &[c.clone(), t(&[3, 1], vec![4, 5, 6]), Value::Int(4)]).unwrap();
    assert_eq!(view(&c).1, [5, 6, 3, 4]);
    let s = as_cache(&c).unwrap().to_string();
    assert!(s.contains("fill_count=4, window_pos=2"), "{s}");
    // Sinks: rows before num_attention_sinks are kept when wrapping.
    let ws = "vm.builtin.attention_kv_cache_window_override_with_sinks";
    let d = create(t(&[4, 1], vec![0; 4]), &[4, 1], 0);
    for i in 1..=6 {
        call(BUILTINS, ws, &[d.clone(), t(&[1, 1], vec![i]), Value::Int(4), Value::Int(1)]).unwrap();
    }
    assert_eq!(view(&d).1, [1, 5, 6, 4]);
    // A window larger than the reserve whose write would go past it (TVM writes outside).
    let e = create(t(&[2, 1], vec![0; 2]), &[2, 1], 1);
    let msg = err("window_override", &[e.clone(), t(&[8, 1], vec![0; 8]), Value::Int(8)]);
    assert!(msg.contains("does not fit the 2 rows"), "{msg}");
    let msg = err("window_override", &[e.clone(), t(&[3, 1], vec![0; 3]), Value::Int(2)]);
    assert!(msg.contains("at most") && msg.contains("found 3"), "{msg}");
    let msg = err("window_override_with_sinks", &[e.clone(), t(&[1, 1], vec![0]), Value::Int(2), Value::Int(3)]);
    assert!(msg.contains("num_attention_sinks"), "{msg}");
    assert_eq!(view(&e), (vec![1, 1], vec![0]));
}

#[test]
fn popn_over_a_long_list_counts_each_cache_once() {
    // 200,000 references to one cache and one to another: a check per occurrence scanning the
    // list would take 4e10 steps; counted once each, the call is immediate. The totals are
    // checked per cache: 200,000 x 0 entries fits, x 1 does not.
    let c = create(t(&[1, 1], vec![1]), &[2, 1], -1);
    let d = create(t(&[1, 1], vec![2]), &[2, 1], -1);
    let mut list = vec![c.clone(); 200_000];
    list.push(d.clone());
    call(BUILTINS, "vm.builtin.attention_kv_cache_array_popn", &[Value::tuple(list.clone()), Value::Int(0)]).unwrap();
    let e = err("array_popn", &[Value::tuple(list), Value::Int(1)]);
    assert!(e.contains("cache 0") && e.contains("asked 200000"), "{e}");
    assert_eq!(view(&c).1, [1]);
    assert_eq!(view(&d).1, [2]);
}

#[test]
fn row_counts_past_what_a_tensor_holds_are_refused_not_wrapped() {
    // Zero-width rows cost nothing, so a count of rows can be anything: appends of 2^60 of them
    // reach the largest tensor (and, past it, i64) and are refused; the cache keeps its rows.
    let c = create(t(&[1, 0], vec![]), &[1, 0], -1);
    let huge = t(&[1 << 60, 0], vec![]);
    let mut filled = 1i64;
    let e = loop {
        match call(BUILTINS, "vm.builtin.attention_kv_cache_append", &[c.clone(), huge.clone()]) {
            Ok(_) => filled += 1 << 60,
            Err(e) => break e.to_string(),
        }
        assert!(filled < i64::MAX / 2, "appends past i64 were accepted");
    };
    assert!(e.contains("is too large for dtype int32"), "{e}");
    assert_eq!(view(&c).0, [filled, 0]);
    let e = super::cache::rows_after("append", i64::MAX - 1, 2).unwrap_err().to_string();
    assert!(e.contains("9223372036854775806 rows and 2 more do not fit in a 64-bit row count"), "{e}");
}
