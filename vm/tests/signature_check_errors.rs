//! The signature checks' refusals at the call boundary (`Signature::check_args`): a shape,
//! tuple, structure or tensor of the wrong size or rank, and a symbolic dimension bound twice to
//! different values. Each names the parameter (path), what was expected and what was found.

use relaxvm::{Shape, Signature, Tensor, Value};

fn refused(sig: &str, args: &[Value]) -> String {
    let sig: Signature = sig.parse().unwrap();
    sig.check_args("f", args).expect_err("refused").to_string()
}

fn tensor(dims: &[i64]) -> Value {
    let n = dims.iter().product::<i64>() as usize;
    Value::Tensor(Tensor::from_vec(Shape::from(dims), vec![0f32; n]).unwrap())
}

#[test]
fn sizes_ranks_and_symbols_that_disagree_with_the_signature() {
    let got = [
        refused("(s: shape<2>) -> i64", &[Value::Shape(Shape::from([1i64, 2, 3]))]),
        refused("(t: tuple<i64, i64>) -> i64", &[Value::tuple(vec![Value::Int(1)])]),
        refused("(d: dict<{a: i64, b: i64}>) -> i64", &[Value::tuple(vec![Value::Int(1)])]),
        refused("(x: tensor<[n, 4], f32>) -> i64", &[tensor(&[4])]),
        refused("(x: tensor<[n], f32>, y: tensor<[n], f32>) -> i64", &[tensor(&[3]), tensor(&[5])]),
    ];
    let want = [
        r#"parameter "s" of f: expected a shape of 2 dimensions, got (1, 2, 3)"#,
        r#"parameter "t" of f: expected a tuple of 2 items, got 1"#,
        r#"parameter "d" of f: expected a structure of 2 slots, got 1"#,
        r#"parameter "x" of f: expected a tensor of rank 2, got shape [4] (rank 1)"#,
        r#"parameter "y" of f: dimension 0 is 5, but symbol n is 3 from parameter "x" of f dimension 0"#,
    ];
    assert_eq!(got, want);
}
