//! `tvm.contrib.sort.{sort,argsort,topk}` against Apache TVM 0.27's own outputs on the same
//! inputs (tests/data/contrib_sort/cases.jsonl, written by gen.py there): ties, NaN,
//! infinities and signed zeros in every supported dtype, along every axis position, for every
//! `ret_type` and for `k` below, at and beyond the axis length. Outputs must match bit for bit.

use relaxvm::{CallCtx, DataType, Device, Registry, Shape, Tensor, Value};
use serde_json::Value as Json;
use std::path::Path;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn dtype(j: &Json) -> DataType {
    j.as_str().unwrap().parse().unwrap()
}

fn shape(j: &Json) -> Vec<i64> {
    j.as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect()
}

#[test]
fn outputs_match_tvm_bit_for_bit() {
    let mut reg = Registry::new();
    relaxvm_builtins::register_all(&mut reg).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/contrib_sort/cases.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let mut count = 0;
    for (line, case) in text.lines().enumerate() {
        let case: Json = serde_json::from_str(case).unwrap();
        let func = case["func"].as_str().unwrap();
        let input = Tensor::from_bytes(
            dtype(&case["dtype"]),
            Shape::new(shape(&case["shape"])),
            &hex(case["input"].as_str().unwrap()),
        )
        .unwrap();
        let outputs: Vec<Tensor> = case["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| Tensor::zeros(shape(&o["shape"]), dtype(&o["dtype"]), Device::cpu(0)).unwrap())
            .collect();
        let mut args = vec![Value::Tensor(input)];
        args.extend(outputs.iter().cloned().map(Value::Tensor));
        if func == "topk" {
            args.push(Value::Int(case["k"].as_i64().unwrap()));
        }
        args.push(Value::Int(case["axis"].as_i64().unwrap()));
        if func == "topk" {
            args.push(Value::str(case["ret_type"].as_str().unwrap()));
        }
        args.push(Value::Bool(case["ascend"].as_bool().unwrap()));
        let f = reg.get(&format!("tvm.contrib.sort.{func}")).unwrap();
        f.call(&mut CallCtx::detached(), &args).unwrap_or_else(|e| panic!("case {line} ({func}): {e}"));
        for (i, (out, expected)) in outputs.iter().zip(case["expected"].as_array().unwrap()).enumerate() {
            assert_eq!(
                out.contiguous_bytes().unwrap(),
                hex(expected.as_str().unwrap()),
                "case {line}: {func} of {} {:?} along axis {}, output {i}",
                case["dtype"],
                case["shape"],
                case["axis"]
            );
        }
        count += 1;
    }
    assert!(count > 600, "{count} cases");
}

/// The error of `tvm.contrib.sort.{func}(args)`, as `{:?}` prints it.
fn refused(func: &str, args: &[Value]) -> String {
    let mut reg = Registry::new();
    relaxvm_builtins::register_all(&mut reg).unwrap();
    let f = reg.get(&format!("tvm.contrib.sort.{func}")).unwrap();
    format!("{:?}", f.call(&mut CallCtx::detached(), args).expect_err("refused"))
}

fn zeros(dims: &[i64], dtype: DataType) -> Value {
    Value::Tensor(Tensor::zeros(Shape::from(dims), dtype, Device::cpu(0)).unwrap())
}

#[test]
fn outputs_of_the_wrong_dtype_or_layout_are_refused() {
    let x = zeros(&[4], DataType::F32);
    let (axis, up) = (Value::Int(0), Value::Bool(true));
    assert_eq!(
        refused("sort", &[x.clone(), zeros(&[4], DataType::I32), axis.clone(), up.clone()]),
        r#"Value("tvm.contrib.sort.sort: output dtype int32 differs from input dtype float32")"#
    );
    // A strided view of 4 elements (every other element of 8) cannot take the result.
    let eight = Tensor::zeros(Shape::from([8i64]), DataType::F32, Device::cpu(0)).unwrap();
    let strided =
        Tensor::from_parts(eight.storage().clone(), 0, Shape::from([4i64]), Some(vec![2]), DataType::F32).unwrap();
    assert_eq!(
        refused("sort", &[x.clone(), Value::Tensor(strided), axis.clone(), up.clone()]),
        r#"Value("tvm.contrib.sort.sort: the output must be a compact tensor")"#
    );
    let k = Value::Int(2);
    assert_eq!(
        refused(
            "topk",
            &[x.clone(), zeros(&[2], DataType::F64), k.clone(), axis.clone(), Value::str("values"), up.clone()]
        ),
        r#"Value("tvm.contrib.sort.topk: values output dtype float64 differs from input dtype float32")"#
    );
    assert_eq!(
        refused("topk", &[x, zeros(&[2], DataType::F16), k, axis, Value::str("indices"), up]),
        r#"Value("tvm.contrib.sort.topk: Unsupported output dtype: float16")"#
    );
}
