//! Tests of the shape-heap builtins.

use super::*;

fn call(name: &str, args: &[Value]) -> Result<Value> {
    crate::table::call(BUILTINS, name, args)
}

fn heap(n: i64) -> Value {
    call("vm.builtin.alloc_shape_heap", &[Value::Int(n)]).unwrap()
}

#[test]
fn design_doc_store_and_load() {
    let h = heap(2);
    let x = Value::Tensor(Tensor::zeros([32, 16], DataType::F32, Default::default()).unwrap());
    let s = call("vm.builtin.shape_of", &[x]).unwrap();
    call("vm.builtin.store_shape", &[s, h.clone(), Value::Int(0), Value::Int(1)]).unwrap();
    let out = call("vm.builtin.load_shape", &[h.clone(), Value::Int(1), Value::Int(0)]).unwrap();
    assert_eq!(out.as_shape().unwrap().dims(), &[16, 32]);
    let with_vm = call("vm.builtin.alloc_shape_heap", &[Value::VmState, Value::Int(3)]).unwrap();
    assert_eq!(with_vm.as_tensor().unwrap().shape().dims(), &[3]);
}

#[test]
fn shape_of_lends_the_tensors_own_shape() {
    let t = Tensor::zeros([32, 16], DataType::F32, Default::default()).unwrap();
    let s = call("vm.builtin.shape_of", &[Value::Tensor(t.clone())]).unwrap();
    // No new shape object: the result is the tensor's, so the interpreter can skip writing
    // it into a register that holds it already.
    assert!(s.as_shape().unwrap().ptr_eq(t.shape()));
    let args = [Value::Tensor(t.clone())];
    let lent = super::shape_of("vm.builtin.shape_of", &args).unwrap();
    assert!(matches!(lent, relaxvm::Selected::Shape(l) if l.ptr_eq(t.shape())));
    assert!(lent.is_held_by(&s), "a register holding it is not written");
    assert_eq!(
        format!("{:?}", call("vm.builtin.shape_of", &[Value::Int(1)]).expect_err("an error")),
        r#"Type { expected: "tensor as argument 0 (tensor) of vm.builtin.shape_of", found: "int 1" }"#
    );
}

#[test]
fn make_shape_reads_every_slot_under_one_read() {
    let h = heap(3);
    call("vm.builtin.store_shape", &[Value::Shape([5, 6, 7].into()), h.clone(), 0.into(), 1.into(), 2.into()]).unwrap();
    let args = [h.clone(), 4.into(), 1.into(), 2.into(), 0.into(), 9.into(), 1.into(), 0.into(), 1.into(), 2.into()];
    assert_eq!(call("vm.builtin.make_shape", &args).unwrap().as_shape().unwrap().dims(), &[7, 9, 5, 7]);
    let e = call("vm.builtin.make_shape", &[h.clone(), 2.into(), 1.into(), 0.into(), 1.into(), 3.into()])
        .expect_err("an error");
    assert_eq!(format!("{e:?}"), r#"Index { what: "shape heap (in vm.builtin.make_shape)", index: 3, len: 3 }"#);
    // The read ended with the call: the heap is writable again.
    call("vm.builtin.store_shape", &[Value::Shape([1].into()), h, 0.into()]).unwrap();
}

#[test]
fn make_shape_shares_a_recent_equal_shape() {
    let make = |dims: &[i64]| {
        let mut args = vec![Value::Null, Value::Int(dims.len() as i64)];
        for d in dims {
            args.extend([Value::Int(0), Value::Int(*d)]);
        }
        call("vm.builtin.make_shape", &args).unwrap().as_shape().unwrap().clone()
    };
    let a = make(&[1, 32]);
    let b = make(&[1, 32]);
    assert!(a.ptr_eq(&b), "an equal recent shape is shared");
    let c = make(&[32, 1]);
    assert!(!c.ptr_eq(&a) && c.dims() == [32, 1]);
    assert_eq!(make(&[]).dims(), &[] as &[i64]);
}

#[test]
fn match_and_make() {
    let h = heap(4);
    let s = Value::Shape([8, 4, 9].into());
    let args = [
        s.clone(),
        h.clone(),
        Value::Int(3),
        0.into(),
        8.into(),
        1.into(),
        2.into(),
        2.into(),
        0.into(),
        Value::str("ctx"),
    ];
    call("vm.builtin.match_shape", &args).unwrap();
    assert_eq!(call("vm.builtin.make_prim_value", &[h.clone(), 1.into(), 2.into()]).unwrap().as_int().unwrap(), 4);
    let again =
        [s.clone(), h.clone(), Value::Int(3), 2.into(), 0.into(), 3.into(), 2.into(), 2.into(), 0.into(), Value::Null];
    call("vm.builtin.match_shape", &again).unwrap();
    let bad = [
        Value::Shape([8, 5, 9].into()),
        h.clone(),
        Value::Int(3),
        2.into(),
        0.into(),
        3.into(),
        2.into(),
        2.into(),
        0.into(),
        Value::str("my_fn"),
    ];
    let e = call("vm.builtin.match_shape", &bad).unwrap_err().to_string();
    assert!(e.contains("my_fn match_cast error,  shape[1] mismatch to a previous populated value. (5 vs. 4"), "{e}");
    let made = call("vm.builtin.make_shape", &[h.clone(), 2.into(), 1.into(), 2.into(), 0.into(), 7.into()]).unwrap();
    assert_eq!(made.as_shape().unwrap().dims(), &[4, 7]);
    let immediate_only = call("vm.builtin.make_shape", &[Value::Null, 1.into(), 0.into(), 5.into()]).unwrap();
    assert_eq!(immediate_only.as_shape().unwrap().dims(), &[5]);
}

#[test]
fn match_errors() {
    let h = heap(1);
    let t = Value::Tensor(Tensor::zeros([2], DataType::F32, Default::default()).unwrap());
    let e = call("vm.builtin.match_shape", &[t.clone(), h.clone(), 1.into(), 0.into(), 3.into(), Value::str("c")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("c match_cast error,  shape[0] mismatch to specified constant. (2 vs. 3)"), "{e}");
    let e = call(
        "vm.builtin.match_shape",
        &[t.clone(), h.clone(), 2.into(), 0.into(), 2.into(), 0.into(), 1.into(), Value::Null],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("match_cast shape size mismatch. (expected 2 dimensions, found 1"), "{e}");
    let e =
        call("vm.builtin.match_shape", &[t.clone(), h.clone(), 1.into(), 9.into(), 0.into()]).unwrap_err().to_string();
    assert!(e.contains("unknown match code 9"), "{e}");
    let e =
        call("vm.builtin.match_shape", &[t.clone(), h.clone(), 1.into(), 1.into(), 5.into()]).unwrap_err().to_string();
    assert!(e.contains("index 5 out of range") && e.contains("match_shape"), "{e}");
    let e = call("vm.builtin.match_shape", &[t.clone(), Value::Null, 1.into(), 1.into(), 0.into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs a shape heap, found null"), "{e}");
    for ndim in [-1, i64::MAX, 5] {
        assert!(format!(
            "{:?}",
            call("vm.builtin.match_shape", &[t.clone(), h.clone(), ndim.into(), 0.into(), 2.into()])
                .expect_err("an error")
        )
        .starts_with(r#"Value("#));
    }
    assert_eq!(
        format!("{:?}", call("vm.builtin.match_shape", &[Value::Int(1), h.clone(), 0.into()]).expect_err("an error")),
        r#"Type { expected: "tensor or shape as argument 0 (value) of vm.builtin.match_shape", found: "int 1" }"#
    );
    call("vm.builtin.match_prim_value", &[5.into(), h.clone(), 1.into(), 0.into(), Value::Null]).unwrap();
    call("vm.builtin.match_prim_value", &[5.into(), h.clone(), 3.into(), 0.into()]).unwrap();
    let e = call("vm.builtin.match_prim_value", &[6.into(), h.clone(), 3.into(), 0.into(), Value::str("pv")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("pv match_cast error,  PrimValue mismatch to a previous populated value. (6 vs. 5"), "{e}");
    assert_eq!(
        format!("{:?}", call("vm.builtin.make_prim_value", &[h.clone(), 2.into(), 0.into()]).expect_err("an error")),
        r#"Value("vm.builtin.make_prim_value: unknown make code 2: expected 0 (immediate) or 1 (load from heap)")"#
    );
    assert_eq!(
        format!("{:?}", call("vm.builtin.make_prim_value", &[Value::Null, 1.into(), 0.into()]).expect_err("an error")),
        r#"Value("vm.builtin.make_prim_value: reading or writing slot 0 needs a shape heap, found null")"#
    );
}

#[test]
fn heap_errors() {
    let h = heap(2);
    assert_eq!(
        format!("{:?}", call("vm.builtin.alloc_shape_heap", &[Value::Int(-1)]).expect_err("an error")),
        r#"Value("vm.builtin.alloc_shape_heap: the heap size must be non-negative, found -1")"#
    );
    let e = call("vm.builtin.alloc_shape_heap", &[Value::Int(i64::MAX)]).unwrap_err().to_string();
    assert!(e.contains("cannot allocate") && e.contains("alloc_shape_heap"), "{e}");
    assert_eq!(
        format!("{:?}", call("vm.builtin.alloc_shape_heap", &[Value::Int(1), Value::Int(1)]).expect_err("an error")),
        r#"Type { expected: "vm_state (%vm) or null as argument 0 (the VM state) of vm.builtin.alloc_shape_heap", found: "int 1" }"#
    );
    assert_eq!(
        call("vm.builtin.alloc_shape_heap", &[Value::Shape([0].into())]).unwrap().as_tensor().unwrap().numel(),
        0
    );
    let e = call("vm.builtin.load_shape", &[h.clone(), Value::Int(2)]).unwrap_err().to_string();
    assert!(e.contains("index 2 out of range for shape heap (in vm.builtin.load_shape) of length 2"), "{e}");
    assert_eq!(
        format!("{:?}", call("vm.builtin.load_shape", &[h.clone(), Value::Int(-1)]).expect_err("an error")),
        r#"Index { what: "shape heap (in vm.builtin.load_shape)", index: -1, len: 2 }"#
    );
    assert_eq!(
        format!("{:?}", call("vm.builtin.load_shape", &[h.clone(), Value::Int(i64::MIN)]).expect_err("an error")),
        r#"Index { what: "shape heap (in vm.builtin.load_shape)", index: -9223372036854775808, len: 2 }"#
    );
    let s = Value::Shape([1, 2].into());
    assert_eq!(
        format!("{:?}", call("vm.builtin.store_shape", &[s.clone(), h.clone(), Value::Int(0)]).expect_err("an error")),
        r#"Value("vm.builtin.store_shape: expected one heap index per dimension of shape (1, 2) (2), found 1")"#
    );
    assert_eq!(
        format!(
            "{:?}",
            call("vm.builtin.store_shape", &[s.clone(), h.clone(), 0.into(), 5.into()]).expect_err("an error")
        ),
        r#"Index { what: "shape heap (in vm.builtin.store_shape)", index: 5, len: 2 }"#
    );
    let f32_heap = Value::Tensor(Tensor::zeros([2], DataType::F32, Default::default()).unwrap());
    let e = call("vm.builtin.store_shape", &[s, f32_heap, 0.into(), 1.into()]).unwrap_err().to_string();
    assert!(e.contains("1-D int64 tensor") && e.contains("float32"), "{e}");
}

#[test]
fn strided_heap_writes_the_right_slots() {
    let base = Tensor::from_vec([4], vec![0i64; 4]).unwrap();
    let strided = Tensor::from_parts(base.storage().clone(), 8, [2].into(), Some(vec![2]), DataType::I64).unwrap();
    call("vm.builtin.store_shape", &[Value::Shape([7, 9].into()), Value::Tensor(strided), 0.into(), 1.into()]).unwrap();
    assert_eq!(base.to_vec::<i64>().unwrap(), vec![0, 7, 0, 9]);
    // Loads read the same slots back, with one hold for all of them.
    let strided = Tensor::from_parts(base.storage().clone(), 8, [2].into(), Some(vec![2]), DataType::I64).unwrap();
    let loaded = call("vm.builtin.load_shape", &[Value::Tensor(strided), 1.into(), 0.into()]).unwrap();
    assert_eq!(loaded.as_shape().unwrap().dims(), [9, 7]);
}

#[test]
fn tensor_to_shape_converts_integer_tensors() {
    for t in [
        Tensor::from_vec([2], vec![3i32, 4]).unwrap(),
        Tensor::from_vec([2], vec![3u8, 4]).unwrap(),
        Tensor::from_vec([2], vec![3i64, 4]).unwrap(),
    ] {
        let s = call("vm.builtin.tensor_to_shape", &[Value::Tensor(t)]).unwrap();
        assert_eq!(s.as_shape().unwrap().dims(), &[3, 4]);
    }
    let big = Tensor::from_vec([1], vec![u64::MAX]).unwrap();
    assert_eq!(
        format!("{:?}", call("vm.builtin.tensor_to_shape", &[Value::Tensor(big)]).expect_err("an error")),
        r#"Value("vm.builtin.tensor_to_shape: dimension 18446744073709551615 does not fit in int64")"#
    );
    let exact = Tensor::from_vec([1], vec![i64::MAX]).unwrap();
    let s = call("vm.builtin.tensor_to_shape", &[Value::Tensor(exact)]).unwrap();
    assert_eq!(s.as_shape().unwrap().dims(), &[i64::MAX]);
    let float = call("vm.builtin.tensor_to_shape", &[Value::Tensor(Tensor::from_vec([1], vec![1.0f32]).unwrap())]);
    assert_eq!(
        format!("{:?}", float.expect_err("an error")),
        r#"Value("vm.builtin.tensor_to_shape: expected a 1-D integer tensor, found tensor of shape (1,) and dtype float32")"#
    );
    assert_eq!(
        format!(
            "{:?}",
            call("vm.builtin.tensor_to_shape", &[Value::Tensor(Tensor::scalar(1i64))]).expect_err("an error")
        ),
        r#"Value("vm.builtin.tensor_to_shape: expected a 1-D integer tensor, found tensor of shape () and dtype int64")"#
    );
}

/// The heaps the specialised builtins are compared on: a fresh heap of 3 slots (word storage,
/// as `alloc_shape_heap` makes), the same as a strided view (slots 8 bytes apart at byte 8 of a
/// larger ordinary storage), a fresh heap whose bytes another reader holds during the call (a
/// word heap's slots are not held: stores go on), the same for a heap of ordinary storage
/// (stores then fail), a view whose 3 slots are one (stride 0), a view of word storage whose
/// slots straddle its words (at byte 4: the storage's doors then serve it), a strided view of
/// word storage (its words, at the view's geometry), and a frozen word heap (stores fail).
/// Slot 1 holds 4 in each.
#[derive(Clone, Copy, Debug)]
enum HeapKind {
    Fresh,
    Strided,
    BeingRead,
    PlainBeingRead,
    OneSlot,
    Straddling,
    WordsStrided,
    Frozen,
}

const HEAP_KINDS: [HeapKind; 8] = [
    HeapKind::Fresh,
    HeapKind::Strided,
    HeapKind::BeingRead,
    HeapKind::PlainBeingRead,
    HeapKind::OneSlot,
    HeapKind::Straddling,
    HeapKind::WordsStrided,
    HeapKind::Frozen,
];

/// Runs `args` through the general builtin and through the version specialised to every
/// operand but `regs` (when the specializer accepts; called with the operands it reads), each on
/// its own new heap of `kind` (`args` names it as `Value::Str("HEAP")`), and returns both
/// outcomes and the heaps after, as text.
fn general_and_special(name: &str, args: &[Value], regs: &[usize], kind: HeapKind) -> (String, Option<String>) {
    let run = |f: &dyn Fn(&[Value]) -> Result<Value>| {
        let h = match kind {
            HeapKind::Fresh | HeapKind::BeingRead | HeapKind::Frozen => heap(3),
            HeapKind::PlainBeingRead => Value::Tensor(Tensor::zeros([3], DataType::I64, Default::default()).unwrap()),
            HeapKind::WordsStrided => {
                let words = relaxvm::Storage::alloc_words(8, Default::default()).unwrap();
                Value::Tensor(Tensor::from_parts(words, 8, [3].into(), Some(vec![2]), DataType::I64).unwrap())
            }
            HeapKind::Straddling => {
                let words = relaxvm::Storage::alloc_words(4, Default::default()).unwrap();
                Value::Tensor(Tensor::from_parts(words, 4, [3].into(), None, DataType::I64).unwrap())
            }
            HeapKind::Strided | HeapKind::OneSlot => {
                let base = Tensor::zeros([8], DataType::I64, Default::default()).unwrap();
                let stride = if matches!(kind, HeapKind::Strided) { 2 } else { 0 };
                let view = Tensor::from_parts(base.storage().clone(), 8, [3].into(), Some(vec![stride]), DataType::I64);
                Value::Tensor(view.unwrap())
            }
        };
        let t = h.as_tensor().unwrap();
        let step = match kind {
            HeapKind::Strided | HeapKind::WordsStrided => 16,
            HeapKind::OneSlot => 0,
            _ => 8,
        };
        t.storage().write(t.byte_offset() + step, &4i64.to_ne_bytes()).unwrap();
        if matches!(kind, HeapKind::Frozen) {
            t.storage().freeze();
        }
        let args: Vec<Value> = args
            .iter()
            .map(|a| if matches!(a, Value::Str(s) if &**s == "HEAP") { h.clone() } else { a.clone() })
            .collect();
        let reader = matches!(kind, HeapKind::BeingRead | HeapKind::PlainBeingRead).then(|| t.storage().bytes());
        let out = f(&args);
        drop(reader);
        // Without addresses: a heap that straddles words renders as "tensor data at 0x… is not
        // aligned", and the two runs' heaps need not share an address (under ASan they never do).
        without_addresses(&format!("{:?} heap {:?}", out.map(|v| v.to_string()), h.to_string()))
    };
    let general = run(&|a| call(name, a));
    let special = crate::table::specialised(BUILTINS, name, args, regs).map(|s| run(&s));
    (general, special)
}

/// `text` with every `0x` followed by hex digits written as `0x…`.
fn without_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("0x") {
        out.push_str(&rest[..at]);
        out.push_str("0x…");
        rest = rest[at + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

#[test]
fn addresses_are_left_out_of_compared_text() {
    assert_eq!(without_addresses("at 0x7bdb04002d04 is; 0x; x0"), "at 0x… is; 0x…; x0");
}

#[test]
fn specialised_shape_builtins_match_the_general_ones() {
    let t = || Value::Tensor(Tensor::zeros([3, 4], DataType::F32, Default::default()).unwrap());
    let h = || Value::str("HEAP");
    let i = |v: i64| Value::Int(v);
    let ctx = || Value::str("ctx");
    let matches: Vec<Vec<Value>> = vec![
        vec![t(), h(), i(2), i(1), i(0), i(0), i(4), ctx()],
        vec![t(), h(), i(2), i(1), i(0), i(3), i(1), ctx()],
        vec![t(), h(), i(2), i(1), i(0), i(3), i(0), ctx()],
        vec![t(), h(), i(2), i(0), i(3), i(0), i(5), ctx()],
        vec![t(), h(), i(2), i(2), i(0), i(1), i(9), Value::Null],
        vec![t(), h(), i(2), i(7), i(0), i(2), i(0)],
        vec![t(), h(), i(1), i(1), i(0), ctx()],
        vec![Value::Shape(Shape::new(vec![3, 4])), Value::Null, i(2), i(0), i(3), i(0), i(4)],
        vec![Value::Shape(Shape::new(vec![3, 4])), Value::Null, i(2), i(1), i(0), i(0), i(4)],
        vec![i(1), h(), i(1), i(1), i(0)],
        vec![t(), i(1), i(2), i(1), i(0), i(1), i(1)],
        // A store, then a check of the slot it stored; a check of a slot stored before.
        vec![t(), h(), i(2), i(1), i(2), i(3), i(2), ctx()],
        vec![t(), h(), i(2), i(3), i(1), i(1), i(2)],
        vec![t(), h(), i(2), i(0), i(3), i(3), i(1)],
        // A check of a slot before a store to it, then a mismatch (of a shape of 3, 1).
        vec![Value::Shape(Shape::new(vec![4, 3, 1])), h(), i(3), i(3), i(1), i(1), i(1), i(0), i(2), ctx()],
        vec![Value::Shape(Shape::new(vec![4, 3, 1])), h(), i(3), i(3), i(1), i(1), i(0), i(3), i(0), ctx()],
        // A negative slot, a slot in a heap that is not one, a tensor of another rank.
        vec![t(), h(), i(2), i(1), i(-1), i(2), i(0)],
        vec![t(), Value::Null, i(2), i(2), i(0), i(3), i(1)],
        vec![t(), h(), i(1), i(2), i(0)],
    ];
    let makes: Vec<Vec<Value>> = vec![
        vec![h(), i(2), i(1), i(1), i(0), i(7)],
        vec![h(), i(2), i(0), i(5), i(0), i(7)],
        vec![Value::Null, i(1), i(0), i(5)],
        vec![Value::Null, i(1), i(1), i(0)],
        vec![h(), i(1), i(1), i(9)],
        vec![h(), i(1), i(4), i(0)],
        vec![i(3), i(1), i(0), i(1)],
        vec![h(), i(0)],
        vec![h(), i(2), i(1), i(-1), i(0), i(1)],
        vec![Value::Null, i(1), i(1), i(1)],
        vec![h(), i(2), i(0), i(2), i(3), i(1)],
        // More dimensions than are built in place.
        std::iter::once(h()).chain(std::iter::once(i(9))).chain((0..9).flat_map(|k| [i(k % 2), i(k % 3)])).collect(),
    ];
    let cases = matches.iter().map(|a| ("vm.builtin.match_shape", a, &[0, 1][..]));
    let cases = cases.chain(makes.iter().map(|a| ("vm.builtin.make_shape", a, &[0][..])));
    let mut specialised = 0;
    for (name, args, regs) in cases {
        for kind in HEAP_KINDS {
            let (general, special) = general_and_special(name, args, regs, kind);
            if let Some(special) = special {
                assert_eq!(general, special, "{name} {args:?} {kind:?}");
                specialised += 1;
            }
        }
    }
    assert_eq!(specialised, HEAP_KINDS.len() * (matches.len() + makes.len()), "every case has fixed codes");
    // Registers where the codes, ndim or err_ctx are: the general function, every time.
    let regs = [0, 1, 7];
    assert!(general_and_special("vm.builtin.match_shape", &matches[0], &regs, HeapKind::Fresh).1.is_none());
    assert!(general_and_special("vm.builtin.make_shape", &makes[0], &[0, 3], HeapKind::Fresh).1.is_none());
    // Fixed operands the general function would refuse: left to it, to report at run time.
    let bad = [t(), h(), i(3), i(1), i(0)];
    assert!(general_and_special("vm.builtin.match_shape", &bad, &[0, 1], HeapKind::Fresh).1.is_none());
    let bad = [h(), i(1), Value::str("x"), i(0)];
    assert!(general_and_special("vm.builtin.make_shape", &bad, &[0], HeapKind::Fresh).1.is_none());
}

#[test]
fn a_specialised_alloc_shape_heap_matches_the_general_one() {
    let describe = |r: Result<Value>| format!("{:?}", r.map(|v| v.to_string()));
    for args in [vec![Value::VmState, Value::Int(3)], vec![Value::Int(0)], vec![Value::Shape([2].into())]] {
        let special = crate::table::specialised(BUILTINS, "vm.builtin.alloc_shape_heap", &args, &[]).unwrap();
        assert_eq!(describe(call("vm.builtin.alloc_shape_heap", &args)), describe(special(&args)), "{args:?}");
    }
    // Operands the general function refuses, or a size in a register: left to it.
    for (args, regs) in [
        (vec![Value::Int(-1)], &[][..]),
        (vec![Value::Int(1), Value::Int(1)], &[]),
        (vec![Value::VmState, Value::Int(3)], &[1]),
    ] {
        assert!(crate::table::specialised(BUILTINS, "vm.builtin.alloc_shape_heap", &args, regs).is_none(), "{args:?}");
    }
}

#[test]
fn a_heap_is_word_storage_and_its_site_hands_it_out_again_zeroed_once_free() {
    let h = heap(3);
    assert!(h.as_tensor().unwrap().storage().is_words(), "alloc_shape_heap makes word storage");
    let dev = Default::default();
    let mut cache = Value::Null;
    let a = own_heap(Some(&mut cache), 3, dev).unwrap();
    a.storage().write(0, &[9; 24]).unwrap();
    let storage = a.storage().clone();
    drop(a);
    // Its storage is still held: a new one.
    let b = own_heap(Some(&mut cache), 3, dev).unwrap();
    assert!(!b.storage().ptr_eq(&storage));
    drop((b, storage));
    let c = own_heap(Some(&mut cache), 3, dev).unwrap();
    assert!(c.ptr_eq(cache.as_tensor().unwrap()) && c.storage().is_words());
    c.storage().write(8, &[7; 8]).unwrap();
    drop(c);
    let d = own_heap(Some(&mut cache), 3, dev).unwrap();
    assert!(d.ptr_eq(cache.as_tensor().unwrap()));
    assert_eq!(d.to_vec::<i64>().unwrap(), [0, 0, 0], "zeroed when handed out again");
    drop(d);
    assert_eq!(own_heap(Some(&mut cache), 2, dev).unwrap().numel(), 2);
    // A frozen kept heap is not handed out again; one too large for word storage is, zeroed.
    cache.as_tensor().unwrap().storage().freeze();
    let e = own_heap(Some(&mut cache), 2, dev).unwrap();
    assert!(!e.storage().is_frozen());
    drop(e);
    let large = relaxvm::storage::words::MAX_WORDS as i64 + 1;
    let f = own_heap(Some(&mut cache), large, dev).unwrap();
    assert!(!f.storage().is_words());
    f.storage().write(0, &[1; 8]).unwrap();
    drop(f);
    let g = own_heap(Some(&mut cache), large, dev).unwrap();
    assert!(g.ptr_eq(cache.as_tensor().unwrap()) && g.storage().bytes()[..8] == [0; 8]);
    // A large heap takes its slots under the storage's lock, as any tensor's.
    call("vm.builtin.store_shape", &[Value::Shape([5].into()), Value::Tensor(g.clone()), Value::Int(large - 1)])
        .unwrap();
    let back = call("vm.builtin.load_shape", &[Value::Tensor(g), Value::Int(large - 1)]).unwrap();
    assert_eq!(back.as_shape().unwrap().dims(), [5]);
}

/// Runs `match_shape` storing `dims` into slots 0 and 1 of `h`, then `make_shape` of those
/// slots, both specialised as a loaded program's call sites are.
fn match_then_make(h: &Value, dims: [i64; 2]) -> Result<Vec<i64>> {
    let i = Value::Int;
    let m = [Value::Shape(dims[..].into()), h.clone(), i(2), i(1), i(0), i(1), i(1)];
    let matcher = crate::table::specialised(BUILTINS, "vm.builtin.match_shape", &m, &[0, 1]).unwrap();
    matcher(&m[..2])?;
    let k = [h.clone(), i(2), i(1), i(0), i(1), i(1)];
    let maker = crate::table::specialised(BUILTINS, "vm.builtin.make_shape", &k, &[0]).unwrap();
    Ok(maker(&k[..1])?.as_shape().unwrap().dims().to_vec())
}

#[test]
fn threads_sharing_one_heap_see_whole_slots_and_every_door_stays_usable() {
    // Four threads match and make on one heap (as calls of one VM function on threads that
    // share its heap would), while another reads it as a tensor and writes it through the
    // storage's doors. Each slot only ever holds A or B (every writer stores its pair), which
    // differ in every byte, so a value mixing their bytes (a torn write) or any other would
    // fail; a thread's make may see another's match.
    const A: i64 = 0x0102_0304_0506_0708;
    const B: i64 = 0x0807_0605_0403_0201;
    let h = heap(2);
    std::thread::scope(|scope| {
        for t in 0..4i64 {
            let h = &h;
            scope.spawn(move || {
                for i in 0..500 {
                    let d = if (i + t) % 2 == 0 { A } else { B };
                    let made = match_then_make(h, [d, d]).unwrap();
                    assert!(made.iter().all(|x| *x == A || *x == B), "{made:x?}");
                }
            });
        }
        scope.spawn(|| {
            let t = h.as_tensor().unwrap();
            for i in 0..500 {
                let seen = t.to_vec::<i64>().unwrap();
                // 0 until the first store to the slot.
                assert!(seen.iter().all(|x| *x == A || *x == B || *x == 0), "{seen:x?}");
                let v = if i % 2 == 0 { A } else { B };
                // Fails only while another door reads (the doors' own rule, as for any tensor).
                let _ = t.storage().write(8 * (i % 2), &v.to_ne_bytes());
            }
        });
    });
}

#[test]
#[allow(unsafe_code)] // a kernel's raw write, as the tvm crate's kernels make it
fn a_kernel_writing_the_heap_in_place_is_seen_by_the_next_make() {
    // A TIR shape function gets the heap as a DLTensor and writes its slots through the raw
    // pointer, on the VM's thread, between the builtins' calls: the words are the storage's
    // own bytes, in place, so the next make reads what it wrote.
    let h = heap(2);
    assert_eq!(match_then_make(&h, [6, 8]).unwrap(), [6, 8]);
    let t = h.as_tensor().unwrap();
    let p = t.data_ptr().cast::<i64>();
    assert_eq!(p as usize % 8, 0);
    // SAFETY: `p` points at the heap's 2 slots (a live, writable, 8-aligned i64 tensor of 2
    // elements), and no other thread touches the heap during the test: the write is sequenced
    // with the builtins' atomic accesses, as a kernel's is.
    unsafe { p.add(1).write(11) };
    let i = Value::Int;
    let k = [h.clone(), i(2), i(1), i(1), i(1), i(0)];
    assert_eq!(call("vm.builtin.make_shape", &k).unwrap().as_shape().unwrap().dims(), [11, 6]);
    let maker = crate::table::specialised(BUILTINS, "vm.builtin.make_shape", &k, &[0]).unwrap();
    assert_eq!(maker(&k[..1]).unwrap().as_shape().unwrap().dims(), [11, 6]);
}

#[test]
fn a_frozen_word_heap_refuses_stores_as_frozen_storage_does() {
    let h = heap(2);
    h.as_tensor().unwrap().storage().freeze();
    let e = match_then_make(&h, [1, 2]).unwrap_err().to_string();
    assert!(e.contains("vm.builtin.match_shape") && e.contains("cannot write to 16 bytes of read-only storage"), "{e}");
    // Reads go on.
    let k = [h.clone(), Value::Int(1), Value::Int(1), Value::Int(0)];
    assert_eq!(call("vm.builtin.make_shape", &k).unwrap().as_shape().unwrap().dims(), [0]);
}
