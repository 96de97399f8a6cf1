//! Storage and tensor allocation, views and copies.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.alloc_storage` | `(%vm, size, device_index, dtype, [scope])` | zeroed storage for `size` elements of `dtype` (a compiled-mode site's reused block: as its last run left it) |
//! | `vm.builtin.alloc_tensor` | `(storage, offset, shape, dtype, [scope])` | a tensor viewing the storage at byte `offset` |
//! | `vm.builtin.reshape` | `(tensor, shape)` | a view (a copy when the tensor is strided) |
//! | `vm.builtin.copy`, `vm.builtin.move` | `(value)` | the same value (no data copy, as TVM) |
//! | `vm.builtin.null_value` | `()` | null |
//! | `vm.builtin.ensure_zero_offset` | `(tensor)` | the tensor, or a copy starting at byte 0 |
//! | `vm.builtin.to_device` | `(tensor, device_type, device_id, [scope])` | a copy on the device (CPU, type 1, only) |
//!
//! `alloc_storage` takes its size as a shape (or an int) counting elements of the dtype hint, as
//! TVM's allocator does: `(24,)` of `float32` is 96 bytes, and the `uint8` sizes Relax emits are
//! bytes. Storage is 64-byte aligned. The VM has one device,
//! so `device_index` is 0 or -1 (host). The only memory scope is `"global"` (or empty or null).

use crate::args::{self, in_builtin, type_err, value_err};
use crate::site_alloc;
use crate::table::{builtin, Builtin};
use relaxvm::{
    CallCtx, DataType, Device, DeviceType, Error, PackedFunc, Result, Selected, Shape, Storage, Tensor, Value,
};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.alloc_storage", ctx alloc_storage).specialized(specialize_alloc_storage),
    builtin!("vm.builtin.alloc_tensor", ctx alloc_tensor).specialized(specialize_alloc_tensor),
    builtin!("vm.builtin.reshape", reshape),
    builtin!("vm.builtin.copy", identity identity).constant_time(),
    builtin!("vm.builtin.move", identity identity).constant_time(),
    builtin!("vm.builtin.null_value", null_value).constant_time(),
    builtin!("vm.builtin.ensure_zero_offset", ensure_zero_offset),
    builtin!("vm.builtin.to_device", to_device),
];

/// Checks an optional memory-scope argument: only global memory exists.
fn scope(name: &str, args: &[Value], i: usize) -> Result<()> {
    match args::opt_str(name, args, i, "memory scope")? {
        None | Some("" | "global") => Ok(()),
        Some(other) => Err(value_err(name, format!("expected memory scope \"global\", found {other:?}"))),
    }
}

/// What `alloc_storage` reads of its operands after the size (the device index, the dtype
/// hint and the scope), checked; `args` has 4 or 5 items.
fn storage_plan(name: &str, args: &[Value]) -> Result<DataType> {
    let device_index = args::int(name, args, 2, "device index")?;
    let dtype = args::dtype(name, args, 3, "dtype hint")?;
    scope(name, args, 4)?;
    if !(-1..=0).contains(&device_index) {
        return Err(Error::index(format!("devices of the VM (in {name}; -1 is the host)"), device_index, 1));
    }
    Ok(dtype)
}

/// `alloc_storage(%vm, size, device_index, dtype, [scope])`.
fn alloc_storage(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 4, 5)?;
    args::vm_state(name, args, 0)?;
    let dims = storage_size(name, args)?;
    // Every argument's type is checked before any value, as TVM's typed calls do.
    let dtype = storage_plan(name, args)?;
    make_storage(name, ctx, dims, dtype)
}

/// `alloc_storage` specialised to a call whose device index, dtype hint and scope are fixed
/// (as TVM emits them): they are checked here, once, and the site reuses its storage from call
/// to call when nothing holds it any more (see [`crate::site_alloc`]).
fn specialize_alloc_storage(name: &'static str, fixed: &[Option<&Value>]) -> Option<PackedFunc> {
    let args = args::fixed_from(fixed, 2)?;
    args::arity_range(name, &args, 4, 5).ok()?;
    let dtype = storage_plan(name, &args).ok()?;
    let f = PackedFunc::new(name, move |ctx, args| {
        args::vm_state(name, args, 0)?;
        make_storage(name, ctx, storage_size(name, args)?, dtype)
    });
    // It reads the VM state and the size.
    Some(f.reading_first(2))
}

/// The size operand of `alloc_storage`: a shape, or one int.
fn storage_size<'a>(name: &str, args: &'a [Value]) -> Result<&'a [i64]> {
    match &args[1] {
        Value::Shape(s) => Ok(s),
        Value::Int(n) => Ok(std::slice::from_ref(n)),
        other => Err(type_err(name, 1, "size", "shape or int", other)),
    }
}

/// Storage for `dims` elements of `dtype`, from the call site's cache when it has one.
/// Inlined into both forms of `alloc_storage`, with [`site_alloc::storage`]: a frame less each
/// for every allocation a model makes.
#[inline(always)]
fn make_storage(name: &str, ctx: &mut CallCtx<'_>, dims: &[i64], dtype: DataType) -> Result<Value> {
    if let Some(d) = dims.iter().find(|d| **d < 0) {
        return Err(value_err(name, format!("storage size {} has negative dimension {d}", Shape::from(dims))));
    }
    // As TVM's allocator: the shape counts elements of the dtype hint (Relax passes uint8 sizes).
    // In 64 bits first (every dimension is non-negative here), which is every size memory can
    // hold; in 128 bits, whose checked product costs about 35 instructions a dimension, only
    // when that overflows, to tell a size beyond the address space from one beyond 128 bits.
    let small = dims.iter().try_fold(dtype.itemsize() as u64, |acc, d| acc.checked_mul(*d as u64));
    let nbytes = match small {
        Some(n) => i128::from(n),
        None => dims.iter().try_fold(dtype.itemsize() as i128, |acc, d| acc.checked_mul(i128::from(*d))).ok_or_else(
            || Error::alloc(u128::MAX, format!("storage size {} overflows (in {name})", Shape::from(dims))),
        )?,
    };
    let device = ctx.device();
    // A site whose VM lends it only its own cache (no table of every site's: native code's
    // sites) pools as well; it then sees no kept header of another site.
    // Asked once: each ask is two calls through the VM's vtable.
    // Native code's sites (compiled mode) get their block as its last run left it, as TVM's
    // pooled allocator gives it (see `site_alloc::Reuse::AsLeft`).
    let reuse = if ctx.from_native_site() { site_alloc::Reuse::AsLeft } else { site_alloc::Reuse::Zeroed };
    let storage = match ctx.pool_sites() {
        Some(sites) => site_alloc::storage(Some(sites), nbytes, device, reuse),
        None => site_alloc::storage(ctx.pool_cache().map(|own| (std::slice::from_mut(own), 0)), nbytes, device, reuse),
    };
    Ok(Value::Storage(storage.map_err(|e| in_builtin(name, e))?))
}

/// What `alloc_tensor` reads of its operands besides the storage and the shape: the byte
/// offset (`offset`, read from operand 1) and the dtype (and the scope), checked.
fn tensor_plan(name: &str, offset: i64, args: &[Value]) -> Result<(usize, DataType)> {
    let dtype = args::dtype(name, args, 3, "dtype")?;
    scope(name, args, 4)?;
    let offset = usize::try_from(offset)
        .map_err(|_| value_err(name, format!("the byte offset must be non-negative, found {offset}")))?;
    if offset % dtype.itemsize() != 0 {
        return Err(value_err(
            name,
            format!(
                "the byte offset must be a multiple of the {dtype} element size ({}), found {offset}",
                dtype.itemsize()
            ),
        ));
    }
    Ok((offset, dtype))
}

/// `alloc_tensor(storage, offset, shape, dtype, [scope])`: a view of the storage.
fn alloc_tensor(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 4, 5)?;
    let storage = tensor_storage(name, args)?;
    // The types first (the dtype's is checked in the plan), then the values.
    let offset = args::int(name, args, 1, "byte offset")?;
    let shape = args::shape(name, args, 2, "shape")?;
    let (offset, dtype) = tensor_plan(name, offset, args)?;
    make_tensor(name, ctx, storage, offset, shape, dtype)
}

/// `alloc_tensor` specialised to a call whose offset, dtype and scope are fixed (as TVM emits
/// them): they are checked here, once.
fn specialize_alloc_tensor(name: &'static str, fixed: &[Option<&Value>]) -> Option<PackedFunc> {
    let args = args::fixed_from(fixed, 3)?;
    args::arity_range(name, &args, 4, 5).ok()?;
    let offset = args::int(name, &args, 1, "byte offset").ok()?;
    let (offset, dtype) = tensor_plan(name, offset, &args).ok()?;
    let f = PackedFunc::new(name, move |ctx, args| {
        let storage = tensor_storage(name, args)?;
        let shape = args::shape(name, args, 2, "shape")?;
        make_tensor(name, ctx, storage, offset, shape, dtype)
    });
    // It reads the storage, the offset (fixed) and the shape.
    Some(f.reading_first(3))
}

/// The storage operand of `alloc_tensor`.
fn tensor_storage<'a>(name: &str, args: &'a [Value]) -> Result<&'a Storage> {
    match &args[0] {
        Value::Storage(s) => Ok(s),
        other => Err(type_err(name, 0, "storage", "storage", other)),
    }
}

/// A tensor viewing `storage`: in the header the call site kept from its last call when
/// nothing else holds that header and the VM pools allocations (see
/// [`Tensor::view_in_slot`]), else a new one. Inlined into both forms of `alloc_tensor`.
#[inline(always)]
fn make_tensor(
    name: &str,
    ctx: &mut CallCtx<'_>,
    storage: &Storage,
    offset: usize,
    shape: &Shape,
    dtype: DataType,
) -> Result<Value> {
    let t = match ctx.pool_cache() {
        Some(slot) => Tensor::view_in_slot(slot, storage, offset, shape, dtype),
        None => Tensor::from_parts(storage.clone(), offset, shape.clone(), None, dtype),
    };
    Ok(Value::Tensor(t.map_err(|e| in_builtin(name, e))?))
}

/// The tensor itself when it is contiguous, else a contiguous copy (an error, not a panic,
/// when its data cannot be viewed).
pub(crate) fn contiguous(name: &str, t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    t.contiguous().map_err(|e| in_builtin(name, e))
}

/// A contiguous copy of `t` in new storage on `device`.
fn copy_to(name: &str, t: &Tensor, device: Device) -> Result<Tensor> {
    let src = contiguous(name, t)?;
    let read = src.storage().bytes();
    let bytes = read.get(src.byte_offset()..).and_then(|b| b.get(..src.nbytes())).ok_or_else(|| {
        value_err(name, format!("tensor data lies outside its storage ({} bytes)", src.storage().len()))
    })?;
    let storage = Storage::alloc_checked(bytes.len() as i128, device).map_err(|e| in_builtin(name, e))?;
    storage.write(0, bytes).map_err(|e| in_builtin(name, e))?;
    Tensor::from_parts(storage, 0, src.shape().clone(), None, src.dtype()).map_err(|e| in_builtin(name, e))
}

/// `reshape(tensor, shape)`: same elements, new shape.
fn reshape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let t = args::tensor(name, args, 0, "tensor")?;
    let shape = args::shape(name, args, 1, "new shape")?;
    if shape.numel() != Some(t.numel()) {
        return Err(value_err(
            name,
            format!("cannot reshape a tensor of shape {} ({} elements) to shape {shape}", t.shape(), t.numel()),
        ));
    }
    let base = contiguous(name, t)?;
    Ok(Value::Tensor(base.reshape(shape.clone()).map_err(|e| in_builtin(name, e))?))
}

/// `copy(x)` / `move(x)`: `x` itself, as TVM's `vm.builtin.copy` does.
fn identity<'a>(name: &str, args: &'a [Value]) -> Result<Selected<'a>> {
    args::arity(name, args, 1)?;
    Ok(Selected::Value(&args[0]))
}

/// `null_value()`: null.
fn null_value(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 0)?;
    Ok(Value::Null)
}

/// `ensure_zero_offset(tensor)`: the tensor when its data starts at byte 0 of its storage,
/// else a copy that does.
fn ensure_zero_offset(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let t = args::tensor(name, args, 0, "tensor")?;
    if t.byte_offset() == 0 {
        return Ok(args[0].clone());
    }
    Ok(Value::Tensor(copy_to(name, t, t.device())?))
}

/// `to_device(tensor, device_type, device_id, [scope])`: a copy on the device.
fn to_device(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 3, 4)?;
    let t = args::tensor(name, args, 0, "tensor")?;
    let dev_type = args::int(name, args, 1, "device type")?;
    let dev_id = args::int(name, args, 2, "device id")?;
    scope(name, args, 3)?;
    if dev_type != i64::from(DeviceType::Cpu.code()) {
        return Err(value_err(
            name,
            format!("expected device type 1 (cpu), the only device available, found {dev_type}"),
        ));
    }
    let id = i32::try_from(dev_id)
        .ok()
        .filter(|i| *i >= 0)
        .ok_or_else(|| value_err(name, format!("expected a device id between 0 and {}, found {dev_id}", i32::MAX)))?;
    Ok(Value::Tensor(copy_to(name, t, Device::cpu(id))?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{DataType, ErrorKind};

    fn call(name: &str, args: &[Value]) -> Result<Value> {
        crate::table::call(BUILTINS, name, args)
    }

    fn storage(bytes: i64) -> Value {
        call(
            "vm.builtin.alloc_storage",
            &[Value::VmState, Value::Shape([bytes].into()), 0.into(), Value::str("uint8"), Value::str("global")],
        )
        .unwrap()
    }

    #[test]
    fn storage_and_tensor_views() {
        let s = storage(64);
        let Value::Storage(st) = &s else { panic!("storage expected") };
        assert_eq!(st.len(), 64);
        let t = call(
            "vm.builtin.alloc_tensor",
            &[s.clone(), 16.into(), Value::Shape([2, 3].into()), Value::str("float32")],
        )
        .unwrap();
        let t = t.as_tensor().unwrap();
        assert_eq!((t.byte_offset(), t.shape().dims(), t.dtype()), (16, &[2i64, 3][..], DataType::F32));
        assert!(t.storage().ptr_eq(st));
        let with_dtype = call(
            "vm.builtin.alloc_storage",
            &[Value::Null, Value::Shape([4].into()), (-1).into(), Value::DType(DataType::F64)],
        )
        .unwrap();
        let Value::Storage(st) = &with_dtype else { panic!("storage expected") };
        assert_eq!(st.len(), 32, "the size counts elements of the dtype hint, as in TVM");
    }

    /// The outcome of `args` through the general builtin and through the version specialised
    /// to every operand but `regs` (`None` when the specializer declines), as text.
    fn general_and_special(name: &str, args: &[Value], regs: &[usize]) -> (String, Option<String>) {
        let describe = |r: Result<Value>| format!("{:?}", r.map(|v| v.describe()));
        let special = crate::table::specialised(BUILTINS, name, args, regs).map(|s| describe(s(args)));
        (describe(call(name, args)), special)
    }

    /// A VM handle that lends each call only its own site cache (as native code's call sites
    /// get theirs), pooling.
    struct OneSite(Value);

    impl relaxvm::VmHandle for OneSite {
        fn call_closure(&mut self, _: &relaxvm::Closure, _: &[Value]) -> Result<Value> {
            unreachable!("not called")
        }
        fn device(&self) -> Device {
            Device::cpu(0)
        }
        fn poll(&mut self) -> Result<()> {
            Ok(())
        }
        fn site_cache(&mut self, _: u32) -> Option<&mut Value> {
            Some(&mut self.0)
        }
        fn allocator(&self) -> relaxvm::Allocator {
            relaxvm::Allocator::Pooled
        }
    }

    #[test]
    fn a_site_with_only_its_own_cache_pools_its_storage() {
        let mut vm = OneSite(Value::Null);
        let args = [Value::VmState, Value::Shape([64].into()), 0.into(), Value::str("uint8")];
        let mut alloc = || alloc_storage("vm.builtin.alloc_storage", &mut CallCtx::calling(&mut vm, 0), &args).unwrap();
        let first = alloc();
        let Value::Storage(s) = &first else { panic!("storage expected") };
        assert!(!s.is_sole(), "the site keeps the storage it made");
        let first_ptr = s.as_ptr();
        drop(first);
        let again = alloc();
        let Value::Storage(s) = &again else { panic!("storage expected") };
        assert_eq!(s.as_ptr(), first_ptr, "the site's storage comes back once free");
    }

    #[test]
    fn specialised_allocations_match_the_general_ones() {
        let (u8, f32) = (Value::str("uint8"), Value::str("float32"));
        let storage_calls = [
            vec![Value::VmState, Value::Shape([64].into()), 0.into(), u8.clone(), Value::str("global")],
            vec![Value::Null, 16.into(), (-1).into(), f32.clone()],
            vec![Value::VmState, Value::Shape([-1].into()), 0.into(), u8.clone()],
            vec![Value::VmState, Value::Shape([1 << 50].into()), 0.into(), u8.clone()],
            vec![Value::VmState, Value::str("size"), 0.into(), u8.clone()],
            vec![1.into(), 16.into(), 0.into(), u8.clone()],
        ];
        for args in &storage_calls {
            let (general, special) = general_and_special("vm.builtin.alloc_storage", args, &[0, 1]);
            assert_eq!(Some(general), special, "{args:?}");
        }
        let s = storage(64);
        let shape = Value::Shape([2, 3].into());
        let tensor_calls = [
            vec![s.clone(), 16.into(), shape.clone(), f32.clone()],
            vec![s.clone(), 0.into(), shape.clone(), f32.clone(), Value::str("global")],
            vec![s.clone(), 48.into(), shape.clone(), f32.clone()],
            vec![s.clone(), 0.into(), Value::str("shape"), f32.clone()],
            vec![Value::Null, 0.into(), shape.clone(), f32.clone()],
        ];
        for args in &tensor_calls {
            let (general, special) = general_and_special("vm.builtin.alloc_tensor", args, &[0, 2]);
            assert_eq!(Some(general), special, "{args:?}");
        }
        // Fixed operands the general function refuses, or registers where they are: left to it.
        let declined = [
            ("vm.builtin.alloc_storage", vec![Value::VmState, 16.into(), 3.into(), u8.clone()], &[0, 1][..]),
            ("vm.builtin.alloc_storage", vec![Value::VmState, 16.into(), 0.into(), 7.into()], &[0, 1]),
            ("vm.builtin.alloc_storage", vec![Value::VmState, 16.into(), 0.into(), u8.clone()], &[0, 1, 3]),
            ("vm.builtin.alloc_tensor", vec![s.clone(), 2.into(), shape.clone(), f32.clone()], &[0, 2]),
            ("vm.builtin.alloc_tensor", vec![s.clone(), (-4).into(), shape.clone(), f32.clone()], &[0, 2]),
            ("vm.builtin.alloc_tensor", vec![s.clone(), 0.into(), shape.clone(), f32.clone()], &[0, 1, 2]),
            ("vm.builtin.alloc_tensor", vec![s, 0.into(), shape, Value::str("global")], &[0, 2]),
        ];
        for (name, args, regs) in &declined {
            assert_eq!(general_and_special(name, args, regs).1, None, "{name} {args:?}");
        }
    }

    #[test]
    fn storage_errors() {
        let n = "vm.builtin.alloc_storage";
        let ok = |size: Value, dev: i64, dtype: &str, scope: Value| {
            call(n, &[Value::VmState, size, dev.into(), Value::str(dtype), scope])
        };
        let e = ok(Value::Shape([-1].into()), 0, "uint8", Value::Null).unwrap_err().to_string();
        assert!(e.contains(n) && e.contains("negative"), "{e}");
        let e = ok(Value::Shape([1 << 50].into()), 0, "uint8", Value::Null).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Alloc { .. }) && e.to_string().contains(n), "{e}");
        // Past 64 bits but within 128: beyond the address space, as any size memory cannot hold
        // (the 64-bit product overflows; the 128-bit one gives the size).
        let e = ok(Value::Shape([1 << 40, 1 << 40].into()), 0, "float32", Value::Null).expect_err("an error");
        assert!(
            matches!(e.kind(), ErrorKind::Alloc { bytes, .. } if *bytes == 1 << 82)
                && e.to_string().contains("size exceeds the address space"),
            "{e:?}"
        );
        assert_eq!(
            format!(
                "{:?}",
                ok(Value::Shape([i64::MAX, i64::MAX, i64::MAX].into()), 0, "float64", Value::Null)
                    .expect_err("an error")
            ),
            r#"Alloc { bytes: 340282366920938463463374607431768211455, reason: "storage size (9223372036854775807, 9223372036854775807, 9223372036854775807) overflows (in vm.builtin.alloc_storage)" }"#
        );
        assert_eq!(
            format!("{:?}", ok(Value::Shape([8].into()), 1, "uint8", Value::Null).expect_err("an error")),
            r#"Index { what: "devices of the VM (in vm.builtin.alloc_storage; -1 is the host)", index: 1, len: 1 }"#
        );
        assert_eq!(
            format!("{:?}", ok(Value::Shape([8].into()), 0, "uint7", Value::Null).expect_err("an error")),
            r#"Value("vm.builtin.alloc_storage: unknown dtype \"uint7\": expected one of bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64")"#
        );
        assert_eq!(
            format!("{:?}", ok(Value::Shape([8].into()), 0, "uint8", Value::str("shared")).expect_err("an error")),
            r#"Value("vm.builtin.alloc_storage: expected memory scope \"global\", found \"shared\"")"#
        );
        assert_eq!(
            format!("{:?}", ok(Value::str("8"), 0, "uint8", Value::Null).expect_err("an error")),
            r#"Type { expected: "shape or int as argument 1 (size) of vm.builtin.alloc_storage", found: "str" }"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[Value::Int(3), Value::Shape([8].into()), 0.into(), Value::str("uint8")])
                    .expect_err("an error")
            ),
            r#"Type { expected: "vm_state (%vm) or null as argument 0 (the VM state) of vm.builtin.alloc_storage", found: "int 3" }"#
        );
    }

    #[test]
    fn tensor_errors() {
        let n = "vm.builtin.alloc_tensor";
        let s = storage(16);
        let e =
            call(n, &[s.clone(), 8.into(), Value::Shape([4].into()), Value::str("float32")]).unwrap_err().to_string();
        assert!(e.contains(n) && e.contains("needs 16 bytes") && e.contains("storage has 16"), "{e}");
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[s.clone(), (-4).into(), Value::Shape([1].into()), Value::str("float32")])
                    .expect_err("an error")
            ),
            r#"Value("vm.builtin.alloc_tensor: the byte offset must be non-negative, found -4")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[s.clone(), 2.into(), Value::Shape([1].into()), Value::str("float32")]).expect_err("an error")
            ),
            r#"Value("vm.builtin.alloc_tensor: the byte offset must be a multiple of the float32 element size (4), found 2")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[s.clone(), 0.into(), Value::Shape([-1].into()), Value::str("float32")])
                    .expect_err("an error")
            ),
            r#"Value("vm.builtin.alloc_tensor: invalid tensor shape (-1,): dimensions must be non-negative and their product must fit in memory")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[s.clone(), 0.into(), Value::Shape([i64::MAX, 2].into()), Value::str("float32")])
                    .expect_err("an error")
            ),
            r#"Value("vm.builtin.alloc_tensor: tensor shape (9223372036854775807, 2) is too large for dtype float32")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[s.clone(), i64::MAX.into(), Value::Shape([0].into()), Value::str("uint8")])
                    .expect_err("an error")
            ),
            r#"Value("vm.builtin.alloc_tensor: tensor of shape (0,) and dtype uint8 at byte offset 9223372036854775807 needs 0 bytes, but the storage has 16")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call(n, &[Value::Int(1), 0.into(), Value::Shape([1].into()), Value::str("float32")])
                    .expect_err("an error")
            ),
            r#"Type { expected: "storage as argument 0 (storage) of vm.builtin.alloc_tensor", found: "int 1" }"#
        );
        let e = call(n, &[s.clone(), 0.into(), Value::Shape([0, 1 << 40, 1 << 40].into()), Value::str("float32")])
            .unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        let empty = call(n, &[s, 16.into(), Value::Shape([0, 3].into()), Value::str("float32")]).unwrap();
        assert_eq!(empty.as_tensor().unwrap().numel(), 0);
    }

    #[test]
    fn reshape_views_and_copies() {
        let t = Tensor::from_vec([2, 3], (0..6).collect::<Vec<i32>>()).unwrap();
        let r = call("vm.builtin.reshape", &[Value::Tensor(t.clone()), Value::Shape([3, 2].into())]).unwrap();
        assert!(r.as_tensor().unwrap().shares_storage(&t));
        let tt = Tensor::from_parts(t.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::I32).unwrap();
        let r = call("vm.builtin.reshape", &[Value::Tensor(tt), Value::Shape([6].into())]).unwrap();
        assert_eq!(r.as_tensor().unwrap().to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
        let e =
            call("vm.builtin.reshape", &[Value::Tensor(t.clone()), Value::Shape([4].into())]).unwrap_err().to_string();
        assert!(e.contains("cannot reshape a tensor of shape (2, 3) (6 elements) to shape (4,)"), "{e}");
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.reshape", &[Value::Tensor(t.clone()), Value::Shape([-2, -3].into())])
                    .expect_err("an error")
            ),
            r#"Value("vm.builtin.reshape: cannot reshape a tensor of shape (2, 3) (6 elements) to shape (-2, -3)")"#
        );
        let z =
            call("vm.builtin.reshape", &[Value::Tensor(Tensor::scalar(1.0f32)), Value::Shape([1, 1].into())]).unwrap();
        assert_eq!(z.as_tensor().unwrap().shape().dims(), &[1, 1]);
    }

    #[test]
    fn copy_is_identity_and_null_value() {
        let t = Value::Tensor(Tensor::scalar(1i64));
        let c = call("vm.builtin.copy", std::slice::from_ref(&t)).unwrap();
        assert!(c.as_tensor().unwrap().shares_storage(t.as_tensor().unwrap()));
        assert!(call("vm.builtin.move", std::slice::from_ref(&t)).unwrap().content_eq(&t));
        assert!(matches!(call("vm.builtin.null_value", &[]).unwrap(), Value::Null));
        assert_eq!(
            format!("{:?}", call("vm.builtin.null_value", std::slice::from_ref(&t)).expect_err("an error")),
            r#"Arity { func: "vm.builtin.null_value", expected: "0", got: 1 }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.copy", &[]).expect_err("an error")),
            r#"Arity { func: "vm.builtin.copy", expected: "1", got: 0 }"#
        );
    }

    #[test]
    fn zero_offset_and_to_device_copy() {
        let s = storage(32);
        let Value::Storage(st) = &s else { panic!("storage expected") };
        st.write(8, &7i32.to_ne_bytes()).unwrap();
        let t = call("vm.builtin.alloc_tensor", &[s.clone(), 8.into(), Value::Shape([2].into()), Value::str("int32")])
            .unwrap();
        let z = call("vm.builtin.ensure_zero_offset", std::slice::from_ref(&t)).unwrap();
        let z = z.as_tensor().unwrap();
        assert_eq!((z.byte_offset(), z.to_vec::<i32>().unwrap()), (0, vec![7, 0]));
        assert!(!z.shares_storage(t.as_tensor().unwrap()));
        let same = call("vm.builtin.ensure_zero_offset", &[Value::Tensor(z.clone())]).unwrap();
        assert!(same.as_tensor().unwrap().shares_storage(z));
        let d = call("vm.builtin.to_device", &[t.clone(), 1.into(), 0.into()]).unwrap();
        assert_eq!(d.as_tensor().unwrap().to_vec::<i32>().unwrap(), vec![7, 0]);
        assert!(!d.as_tensor().unwrap().shares_storage(t.as_tensor().unwrap()));
        assert_eq!(
            format!("{:?}", call("vm.builtin.to_device", &[t.clone(), 2.into(), 0.into()]).expect_err("an error")),
            r#"Value("vm.builtin.to_device: expected device type 1 (cpu), the only device available, found 2")"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.to_device", &[t.clone(), 1.into(), (-1).into()]).expect_err("an error")),
            r#"Value("vm.builtin.to_device: expected a device id between 0 and 2147483647, found -1")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.to_device", &[t.clone(), 1.into(), i64::MAX.into()]).expect_err("an error")
            ),
            r#"Value("vm.builtin.to_device: expected a device id between 0 and 2147483647, found 9223372036854775807")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.to_device", &[t, 1.into(), 0.into(), Value::str("texture")]).expect_err("an error")
            ),
            r#"Value("vm.builtin.to_device: expected memory scope \"global\", found \"texture\"")"#
        );
    }
}
