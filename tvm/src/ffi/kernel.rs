//! Calling a compiled kernel: relaxvm values in, tvm-ffi's safe-call ABI, the result or the
//! kernel's error out.

use super::abi::{type_index, DLTensor, SafeCall, TVMFFIAny};
use super::{convert, raised};
use relaxvm::{Result, Tensor, Value};
use smallvec::SmallVec;
use std::panic::AssertUnwindSafe;

/// Kernels assume tensor data aligned like TVM's allocations.
const KERNEL_ALIGNMENT: usize = relaxvm::storage::ALIGNMENT;

/// A tensor argument passed through a compact, aligned copy, written back afterwards (kernels
/// write their outputs in place).
struct Staged {
    original: Tensor,
    copy: Tensor,
}

/// Copies a kernel's compact `copy` back into the tensor it stands for (compact but misaligned,
/// or a strided view), element by element for a strided one.
fn write_back(original: &Tensor, copy: &Tensor) -> Result<()> {
    let item = original.dtype().itemsize();
    let bytes = &copy.storage().bytes()[..original.numel() * item];
    if original.is_contiguous() {
        return original.storage().write(original.byte_offset(), bytes);
    }
    let (dims, strides) = (original.shape().dims(), original.strides());
    let mut index = vec![0i64; dims.len()];
    for element in bytes.chunks_exact(item) {
        let offset: i64 = index.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>() * item as i64;
        let at = usize::try_from(original.byte_offset() as i64 + offset)
            .map_err(|_| relaxvm::Error::value("a strided view reaching before its storage"))?;
        original.storage().write(at, element)?;
        for d in (0..dims.len()).rev() {
            index[d] += 1;
            if index[d] < dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Ok(())
}

/// Calls kernel `name` (`f`) with `args`.
pub fn call(name: &str, f: SafeCall, args: &[Value]) -> Result<Value> {
    let mut staged: SmallVec<[Staged; 2]> = SmallVec::new();
    // The tensors whose DLTensor each argument gets (the arguments' own, or staged copies).
    let mut tensors: SmallVec<[Option<Tensor>; 8]> = SmallVec::with_capacity(args.len());
    let mut anys: SmallVec<[TVMFFIAny; 8]> = SmallVec::with_capacity(args.len());
    for (i, v) in args.iter().enumerate() {
        match convert::scalar_to_ffi(v, &|| format!("argument {i} of kernel {name:?}"))? {
            Some(any) => {
                anys.push(any);
                tensors.push(None);
            }
            None => {
                let Value::Tensor(t) = v else { unreachable!("scalar_to_ffi returns None only for tensors") };
                let aligned = (t.data_ptr() as usize) % KERNEL_ALIGNMENT == 0;
                let t = if aligned && t.is_contiguous() {
                    t.clone()
                } else {
                    let copy = Tensor::from_bytes(t.dtype(), t.shape().clone(), &t.contiguous_bytes())?;
                    staged.push(Staged { original: t.clone(), copy: copy.clone() });
                    copy
                };
                anys.push(TVMFFIAny::NONE);
                tensors.push(Some(t));
            }
        }
    }
    // DLTensors are built after every tensor is settled, so the pointers into `dls` stay valid.
    let dls: SmallVec<[DLTensor; 8]> = tensors.iter().flatten().map(|t| convert::dl_tensor(t, None)).collect();
    let mut next = dls.iter();
    for (any, t) in anys.iter_mut().zip(&tensors) {
        if t.is_some() {
            let dl: &DLTensor = next.next().expect("one DLTensor per tensor argument");
            *any = TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, (dl as *const DLTensor).cast());
        }
    }
    let num_args = i32::try_from(anys.len()).map_err(|_| relaxvm::Error::value(format!("{} arguments", anys.len())))?;
    raised::clear();
    let mut result = TVMFFIAny::NONE;
    let called = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `f` is a kernel exported by a library that stays loaded while this function
        // exists (the caller holds it); `anys` holds `num_args` values whose DLTensors (in
        // `dls`) view tensors kept alive in `tensors` for the whole call, with shapes owned by
        // those tensors; `result` is writable.
        unsafe { f(std::ptr::null_mut(), anys.as_ptr(), num_args, &mut result) }
    }));
    let rc = called.unwrap_or(-1);
    if rc != 0 {
        return Err(raised::take(&format!("kernel {name:?}")));
    }
    for s in &staged {
        write_back(&s.original, &s.copy)?;
    }
    convert::result_from_ffi(&result)
}
