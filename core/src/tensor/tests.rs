//! Tests of tensors: construction, views, equality, printing.

use super::*;
use ndarray::array;

#[test]
fn from_array_is_zero_copy_and_views_back() {
    let a = array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn();
    let p = a.as_ptr() as usize;
    let t = Tensor::from_array(a);
    assert_eq!(t.data_ptr() as usize, p);
    assert_eq!(t.shape().dims(), &[2, 2]);
    assert_eq!(t.view::<f32>().unwrap()[[1, 0]], 3.0);
    assert_eq!(
        format!("{:?}", t.view::<f64>().expect_err("an error")),
        r#"Type { expected: "tensor of float64", found: "tensor of float32" }"#
    );
}

#[test]
fn strided_views_and_contiguous_copies() {
    let t = Tensor::from_vec([2, 3], (0..6).collect::<Vec<i64>>()).unwrap();
    // The transpose: shape (3, 2), strides (1, 3).
    let tt = Tensor::from_parts(t.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::I64).unwrap();
    assert!(!tt.is_contiguous());
    assert_eq!(tt.to_vec::<i64>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    let r = tt.reshape([6]).unwrap();
    assert!(!r.shares_storage(&t));
    let r2 = t.reshape([3, 2]).unwrap();
    assert!(r2.shares_storage(&t));
    assert_eq!(
        format!("{:?}", t.reshape([4]).expect_err("an error")),
        r#"Value("cannot reshape tensor of shape (2, 3) (6 elements) to (4,)")"#
    );
}

#[test]
fn from_parts_checks_bounds() {
    let s = Storage::alloc(16, Device::cpu(0)).unwrap();
    assert!(Tensor::from_parts(s.clone(), 0, [4].into(), None, DataType::F32).is_ok());
    assert_eq!(
        format!("{:?}", Tensor::from_parts(s.clone(), 4, [4].into(), None, DataType::F32).expect_err("an error")),
        r#"Value("tensor of shape (4,) and dtype float32 at byte offset 4 needs 16 bytes, but the storage has 16")"#
    );
    assert_eq!(
        format!("{:?}", Tensor::from_parts(s.clone(), 0, [-1].into(), None, DataType::F32).expect_err("an error")),
        r#"Value("invalid tensor shape (-1,): dimensions must be non-negative and their product must fit in memory")"#
    );
    assert_eq!(
        format!(
            "{:?}",
            Tensor::from_parts(s.clone(), 0, [2, 2].into(), Some(vec![4, 1]), DataType::F32).expect_err("an error")
        ),
        r#"Value("tensor of shape (2, 2) and dtype float32 at byte offset 0 needs 24 bytes, but the storage has 16")"#
    );
    assert_eq!(
        format!(
            "{:?}",
            Tensor::from_parts(s.clone(), 0, [2].into(), Some(vec![-1]), DataType::F32).expect_err("an error")
        ),
        r#"Value("negative strides [-1] are not supported")"#
    );
    assert_eq!(
        format!("{:?}", Tensor::from_parts(s.clone(), 100, [0].into(), None, DataType::F32).expect_err("an error")),
        r#"Value("tensor of shape (0,) and dtype float32 at byte offset 100 needs 0 bytes, but the storage has 16")"#
    );
    let e = Tensor::from_parts(s, 0, [0, 1 << 62, 4].into(), None, DataType::F32).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
}

#[test]
fn from_bytes_checks_length_and_bools() {
    let t = Tensor::from_bytes(DataType::F32, [2], &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    let e = Tensor::from_bytes(DataType::F32, [2], &[0; 7]).unwrap_err().to_string();
    assert!(e.contains("needs 8 bytes"), "{e}");
    assert_eq!(
        format!("{:?}", Tensor::from_bytes(DataType::Bool, [1], &[2]).expect_err("an error")),
        r#"Value("bool tensor data must be 0 or 1 bytes, found 2")"#
    );
    assert_eq!(
        format!("{:?}", Tensor::from_bytes(DataType::I8, [-1], &[]).expect_err("an error")),
        r#"Value("invalid tensor shape (-1,): dimensions must be non-negative and fit in memory")"#
    );
    assert_eq!(
        format!("{:?}", Tensor::from_bytes(DataType::I64, [i64::MAX, 2], &[]).expect_err("an error")),
        r#"Value("tensor of shape (9223372036854775807, 2) is too large")"#
    );
    assert_eq!(Tensor::from_bytes(DataType::I32, [0, 3], &[]).unwrap().numel(), 0);
}

#[test]
fn scalars_and_zeros() {
    assert_eq!(Tensor::scalar(true).scalar_i64(), Some(1));
    assert_eq!(Tensor::scalar(2.5f64).scalar_f64(), Some(2.5));
    assert_eq!(Tensor::scalar(half::f16::from_f32(1.5)).scalar_f64(), Some(1.5));
    let z = Tensor::zeros([2, 2], DataType::I32, Device::cpu(0)).unwrap();
    assert_eq!(z.scalar_i64(), None);
    assert_eq!(z.to_vec::<i32>().unwrap(), vec![0; 4]);
    assert_eq!(
        format!("{:?}", Tensor::zeros([1 << 30, 1 << 30], DataType::F64, Device::cpu(0)).expect_err("an error")),
        r#"Alloc { bytes: 9223372036854775808, reason: "size exceeds the address space" }"#
    );
}

#[test]
fn content_equality_and_display() {
    let a = Tensor::from_vec([2], vec![1i32, 2]).unwrap();
    let b = Tensor::from_vec([2], vec![1i32, 2]).unwrap();
    assert!(a.content_eq(&b));
    assert!(!a.content_eq(&Tensor::from_vec([2], vec![1i32, 3]).unwrap()));
    assert_eq!(a.to_string(), "[1, 2]");
    assert!(format!("{a:?}").contains("int32"));
}

#[test]
fn a_bool_view_of_bytes_other_than_0_and_1_is_an_error() {
    // Bytes written as u8 and viewed as bool through the same storage: reading a 2 as a
    // bool would be undefined behaviour, so the view refuses it.
    let storage = Storage::alloc(3, Device::cpu(0)).unwrap();
    storage.write(0, &[1, 0, 2]).unwrap();
    let t = Tensor::from_parts(storage.clone(), 0, [3].into(), None, DataType::Bool).unwrap();
    let e = t.view::<bool>().unwrap_err();
    assert!(e.to_string().contains("byte 2"), "{e}");
    let head = Tensor::from_parts(storage, 0, [2].into(), None, DataType::Bool).unwrap();
    assert_eq!(head.to_vec::<bool>().unwrap(), [true, false]);
}

#[test]
fn bool_bytes_other_than_0_and_1_normalize_to_true() {
    let storage = Storage::alloc(4, Device::cpu(0)).unwrap();
    storage.write(0, &[2, 0, 1, 255]).unwrap();
    let t = Tensor::from_parts(storage, 0, [4].into(), None, DataType::Bool).unwrap();
    assert_eq!(t.with_normalized_bools().unwrap().to_vec::<bool>().unwrap(), [true, false, true, true]);
    let fine = Tensor::from_vec([2], vec![true, false]).unwrap();
    assert!(fine.clone().with_normalized_bools().unwrap().ptr_eq(&fine));
}

#[test]
fn a_view_keeps_writes_out_until_it_drops() {
    let t = Tensor::from_vec([2], vec![1i32, 2]).unwrap();
    let v = t.view::<i32>().unwrap();
    assert_eq!(
        format!("{:?}", t.storage().write(0, &[0; 4]).expect_err("an error")),
        r#"Value("cannot write to a tensor whose bytes are being read (the destination overlaps a source, or another thread reads it)")"#
    );
    assert_eq!(v[[0]], 1);
    drop(v);
    t.storage().write(0, &[0; 4]).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), [0, 2]);
}
