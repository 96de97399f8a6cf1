//! The builtins through their packed functions: argument checks and in-place writes. Bit
//! exactness against TVM is checked by `tests/test_tvm_lm_support.py` over TVM's recordings.

use super::BUILTINS;
use crate::table::call;
use relaxvm::{Shape, Tensor, Value};

fn t<T: relaxvm::Element>(dims: &[i64], v: Vec<T>) -> Value {
    Value::Tensor(Tensor::from_vec(Shape::from(dims), v).unwrap())
}

fn err(name: &str, args: &[Value]) -> String {
    call(BUILTINS, name, args).expect_err("an error").to_string()
}

#[test]
fn sampling_returns_token_indices() {
    let logits = t(&[1, 4], vec![0.1f32, 2.0, -1.0, 0.5]);
    let f = "vm.builtin.sample_top_p_from_logits";
    assert_eq!(
        call(BUILTINS, f, &[logits.clone(), Value::Float(0.0), Value::Float(0.9), Value::Float(0.3)])
            .unwrap()
            .as_int()
            .unwrap(),
        1
    );
    // Ints convert to double, as in TVM.
    assert_eq!(
        call(BUILTINS, f, &[logits, Value::Int(0), Value::Int(1), Value::Float(0.3)]).unwrap().as_int().unwrap(),
        1
    );
    let prob = t(&[4], vec![0.1f32, 0.6, 0.1, 0.2]);
    let g = "vm.builtin.sample_top_p_from_prob";
    assert_eq!(call(BUILTINS, g, &[prob, Value::Float(0.5), Value::Float(0.2)]).unwrap().as_int().unwrap(), 1);
}

#[test]
fn bad_tensors_are_refused_with_what_was_expected() {
    let f = "vm.builtin.sample_top_p_from_logits";
    let e = err(f, &[t(&[2], vec![1i32, 2]), Value::Float(1.0), Value::Float(0.9), Value::Float(0.3)]);
    assert!(e.contains("float32") && e.contains("int32"), "{e}");
    let e = err(f, &[t(&[2, 2], vec![1.0f32; 4]), Value::Float(1.0), Value::Float(0.9), Value::Float(0.3)]);
    assert!(e.contains("leading dimensions") && e.contains("(2, 2)"), "{e}");
    let e = err(f, &[t(&[], vec![1.0f32]), Value::Float(1.0), Value::Float(0.9), Value::Float(0.3)]);
    assert!(e.contains("0-d"), "{e}");
    let e = err(f, &[t(&[0], Vec::<f32>::new()), Value::Float(1.0), Value::Float(0.9), Value::Float(0.3)]);
    assert!(e.contains("empty logits"), "{e}");
    let e = err(f, &[t(&[1], vec![1.0f32]), Value::str("x"), Value::Float(0.9), Value::Float(0.3)]);
    assert!(e.contains("temperature") && e.contains("float"), "{e}");
    let e = err(f, &[t(&[1], vec![1.0f32])]);
    assert!(e.contains('4'), "{e}");
}

#[test]
fn nan_logits_sample_as_tvm_arithmetic_says() {
    // NaN logits sort (NaN stops libstdc++'s scans) and then poison the softmax sums: TVM's
    // final check fails, and so does ours, with its message.
    let f = "vm.builtin.sample_top_p_from_logits";
    let v: Vec<f32> = (0..64).map(|i| if i % 5 == 0 { f32::NAN } else { i as f32 }).collect();
    let e = err(f, &[t(&[64], v.clone()), Value::Float(1.0), Value::Float(0.9), Value::Float(0.5)]);
    assert!(e.contains("uniform_sample 0.5") && e.contains("NaN"), "{e}");
    // Greedy picks whatever the sort left first, without the sums.
    assert!(call(BUILTINS, f, &[t(&[64], v), Value::Float(0.0), Value::Float(0.9), Value::Float(0.5)]).is_ok());
}

#[test]
fn multinomial_checks_rows_and_sample_dtype() {
    let f = "vm.builtin.multinomial_from_uniform";
    let prob = t(&[2, 3], vec![0.2f32, 0.3, 0.5, 0.9, 0.05, 0.05]);
    let out = call(BUILTINS, f, &[prob.clone(), t(&[2, 1], vec![0.4f32, 0.95])]).unwrap();
    let out = out.as_tensor().unwrap();
    assert_eq!(out.shape().to_vec(), [2, 1]);
    assert_eq!(out.to_vec::<i64>().unwrap(), [1, 2]);
    let e = err(f, &[prob.clone(), t(&[2, 1], vec![0.4f64, 0.95])]);
    assert!(e.contains("float32") && e.contains("float64"), "{e}");
    let e = err(f, &[prob.clone(), t(&[1], vec![0.4f32])]);
    assert!(e.contains("one sample per row"), "{e}");
    let e = err(f, &[t(&[3], vec![0.2f32, 0.3, 0.5]), t(&[3], vec![0.4f32; 3])]);
    assert!(e.contains("(batch, vocab)"), "{e}");
    let e = err(f, &[t(&[1, 0], Vec::<f32>::new()), t(&[1], vec![0.4f32])]);
    assert!(e.contains("empty vocabulary"), "{e}");
    let empty = call(BUILTINS, f, &[t(&[0, 3], Vec::<f32>::new()), t(&[0], Vec::<f32>::new())]).unwrap();
    assert_eq!(empty.as_tensor().unwrap().shape().to_vec(), [0, 1]);
}

#[test]
fn penalties_write_in_place_and_check_ids() {
    let logits = Tensor::from_vec(Shape::from([1, 4]), vec![2.0f32, -2.0, 1.0, 0.0]).unwrap();
    let f = "vm.builtin.apply_repetition_penalty";
    call(BUILTINS, f, &[Value::Tensor(logits.clone()), t(&[1, 3], vec![0i32, 1, 0]), Value::Float(2.0)]).unwrap();
    assert_eq!(logits.to_vec::<f32>().unwrap(), [0.5, -4.0, 1.0, 0.0]);
    let e = err(f, &[Value::Tensor(logits.clone()), t(&[2], vec![0i32, 4]), Value::Float(2.0)]);
    assert!(e.contains("token_ids[1] = 4") && e.contains("4 logits"), "{e}");
    let e = err(f, &[Value::Tensor(logits.clone()), t(&[1], vec![-1i32]), Value::Float(2.0)]);
    assert!(e.contains("-1"), "{e}");
    let e = err(f, &[Value::Tensor(logits.clone()), t(&[2, 1], vec![0i32, 1]), Value::Float(2.0)]);
    assert!(e.contains("token_ids") && e.contains("(2, 1)"), "{e}");
    // A refused call changed nothing.
    assert_eq!(logits.to_vec::<f32>().unwrap(), [0.5, -4.0, 1.0, 0.0]);

    let g = "vm.builtin.apply_presence_and_frequency_penalty";
    let args = [
        Value::Tensor(logits.clone()),
        t(&[2], vec![2i32, 3]),
        t(&[2], vec![1i32, 3]),
        Value::Float(0.5),
        Value::Float(0.25),
    ];
    call(BUILTINS, g, &args).unwrap();
    assert_eq!(logits.to_vec::<f32>().unwrap(), [0.5, -4.0, 0.25, -1.25]);
    let e = err(
        g,
        &[
            Value::Tensor(logits.clone()),
            t(&[2], vec![2i32, 3]),
            t(&[1], vec![1i32]),
            Value::Float(0.5),
            Value::Float(0.25),
        ],
    );
    assert!(e.contains("token_freqs") && e.contains("(2,)"), "{e}");
}

#[test]
fn softmax_writes_in_place_and_refuses_rows_it_would_skip() {
    let logits = Tensor::from_vec(Shape::from([1, 3]), vec![1.0f32, 1.0, 1.0]).unwrap();
    let f = "vm.builtin.apply_softmax_with_temperature";
    call(BUILTINS, f, &[Value::Tensor(logits.clone()), Value::Float(1.0)]).unwrap();
    let p = logits.to_vec::<f32>().unwrap();
    assert!(p.iter().all(|x| (*x - 1.0 / 3.0).abs() < 1e-7), "{p:?}");
    let e = err(f, &[t(&[2, 3], vec![0.0f32; 6]), Value::Float(1.0)]);
    assert!(e.contains("leading dimensions"), "{e}");
    let strided = Tensor::from_vec(Shape::from([4]), vec![0.0f32; 4]).unwrap();
    let strided =
        Tensor::from_parts(strided.storage().clone(), 0, Shape::from([2]), Some(vec![2]), relaxvm::DataType::F32)
            .unwrap();
    let e = err(f, &[Value::Tensor(strided), Value::Float(1.0)]);
    assert!(e.contains("contiguous"), "{e}");
}

#[test]
fn a_broadcast_of_gigabytes_is_a_memory_error_not_an_abort() {
    // 2^40 logits from 4 bytes (stride 0): copying them is refused by the allocator.
    let one = Tensor::from_vec(Shape::from([1]), vec![0.0f32]).unwrap();
    let huge =
        Tensor::from_parts(one.storage().clone(), 0, Shape::from([1i64 << 40]), Some(vec![0]), relaxvm::DataType::F32)
            .unwrap();
    for name in ["vm.builtin.sample_top_p_from_logits", "vm.builtin.sample_top_p_from_prob"] {
        let mut args = vec![Value::Tensor(huge.clone()), Value::Float(1.0), Value::Float(0.9), Value::Float(0.5)];
        if name.ends_with("prob") {
            args.pop();
        }
        let e = call(BUILTINS, name, &args).expect_err("an error");
        assert!(matches!(e.root().kind(), relaxvm::ErrorKind::Alloc { .. }), "{name}: {e}");
    }
}
