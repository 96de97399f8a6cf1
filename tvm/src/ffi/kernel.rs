//! Calling a compiled kernel: relaxvm values in, tvm-ffi's safe-call ABI, the result or the
//! kernel's error out.

use super::abi::{type_index, DLTensor, SafeCall, TVMFFIAny};
use super::{convert, guard, raised};
use relaxvm::{Result, Tensor, Value};
use smallvec::SmallVec;
use std::mem::MaybeUninit;
use std::panic::AssertUnwindSafe;

/// Kernels assume tensor data aligned like TVM's allocations.
const KERNEL_ALIGNMENT: usize = relaxvm::storage::ALIGNMENT;

/// A tensor argument passed through a compact, aligned copy, written back afterwards (kernels
/// write their outputs in place).
struct Staged {
    /// The argument's index.
    arg: usize,
    copy: Tensor,
}

/// Where the DLTensor of a tensor argument points: the argument itself (borrowed, no reference
/// count taken) or its staged copy.
enum Source {
    Arg(usize),
    Staged(usize),
}

fn tensor_arg(args: &[Value], i: usize) -> &Tensor {
    match &args[i] {
        Value::Tensor(t) => t,
        _ => unreachable!("only tensor arguments have a source"),
    }
}

/// Copies a kernel's compact `copy` back into the tensor it stands for (compact but misaligned,
/// or a strided view), element by element for a strided one.
pub(crate) fn write_back(original: &Tensor, copy: &Tensor) -> Result<()> {
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

/// Whether the kernel changed `copy`, the compact copy made of read-only `original`.
pub(crate) fn changed(original: &Tensor, copy: &Tensor) -> Result<bool> {
    let len = original.numel() * original.dtype().itemsize();
    Ok(copy.storage().bytes()[..len] != original.contiguous_bytes()?[..])
}

/// True the first time a call of kernel `name` at `address` (each opened library has its own)
/// has to copy an argument.
fn first_copy_for(name: &str, address: usize) -> bool {
    type Said = std::collections::HashSet<(String, usize)>;
    static SAID: std::sync::OnceLock<std::sync::Mutex<Said>> = std::sync::OnceLock::new();
    let mut said = SAID.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    said.insert((name.to_string(), address))
}

/// The most arguments [`call_direct`] takes in its common form: its arrays (a DLTensor and a
/// value per argument, about 1 KiB for 24) live on the stack, so the common calls, which take
/// a few arguments, use a smaller frame than the wide form.
const DIRECT_ARGS: usize = 8;

/// The most arguments any call keeps on the stack: TVM's paged-attention kernels take about
/// twenty, and beyond the inline size their lists cost an allocation per call.
const WIDE_ARGS: usize = 24;

/// Calls kernel `name` (`f`) with `args`.
pub fn call(name: &str, f: SafeCall, args: &[Value]) -> Result<Value> {
    let direct = if args.len() <= DIRECT_ARGS {
        call_direct::<DIRECT_ARGS>(name, f, args)
    } else if args.len() <= WIDE_ARGS {
        call_direct::<WIDE_ARGS>(name, f, args)
    } else {
        None
    };
    match direct {
        Some(result) => result,
        None => call_staged(name, f, args),
    }
}

/// The common call: every tensor argument is aligned and contiguous, so its DLTensor views it
/// in place, and the DLTensors and arguments are built once in arrays on the stack (no vectors
/// moved, no second pass). `None` when an argument needs an aligned copy: [`call_staged`] then
/// makes the whole call, meeting any argument error in the same order this loop would.
/// `N` is the arrays' length; more arguments than that give `None` too (the staged call takes
/// any number).
fn call_direct<const N: usize>(name: &str, f: SafeCall, args: &[Value]) -> Option<Result<Value>> {
    if args.len() > N {
        // Never from `call`, which picks `N`; a kernel must not get fewer arguments than given.
        return None;
    }
    let mut dls = [const { MaybeUninit::<DLTensor>::uninit() }; N];
    // Not cleared first: each call writes exactly its arguments' entries (the arrays are as
    // long as the widest call, and clearing them cost up to 384 bytes of stores a call).
    let mut anys = [const { MaybeUninit::<TVMFFIAny>::uninit() }; N];
    // Zipped, not indexed: `args.len() <= N` is the caller's, so indexing would check bounds.
    for (i, ((v, any), dl)) in args.iter().zip(&mut anys).zip(&mut dls).enumerate() {
        if let Value::Tensor(t) = v {
            if !viewable(t) {
                return None;
            }
            let dl: *const DLTensor = dl.write(convert::dl_tensor(t, None));
            any.write(TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, dl.cast()));
        } else {
            match convert::scalar_to_ffi(v, &|| format!("argument {i} of kernel {name:?}")) {
                Ok(Some(value)) => {
                    any.write(value);
                }
                Ok(None) => unreachable!("only tensors have no scalar form"),
                Err(e) => return Some(Err(e)),
            }
        }
    }
    // SAFETY: the loop wrote the first `args.len()` (at most `N`, checked above) entries of
    // `anys`, one per argument (it returned early otherwise), and `MaybeUninit<T>` has `T`'s
    // layout.
    let anys: &[TVMFFIAny] = unsafe { std::slice::from_raw_parts(anys.as_ptr().cast(), args.len()) };
    // `dls` is not moved or written again while the kernel runs: the pointers in `anys` stay
    // valid, and each DLTensor's shape points into its tensor, borrowed from `args`.
    Some(invoke(name, f, anys).and_then(|r| convert::result_from_ffi(&r)))
}

/// Whether a kernel can view `t` in place: contiguous, aligned as TVM's kernels assume, and
/// not read-only foreign memory (frozen but not in read-only pages: a DLPack import flagged
/// read-only, whose memory the hardware may let a kernel write). Such memory reaches the kernel
/// as a private copy, which is not written back (a kernel that changes it gets an error);
/// constants are viewed in place, since their
/// pages fault on a write.
pub(crate) fn viewable(t: &Tensor) -> bool {
    t.is_contiguous()
        && (t.data_ptr() as usize).is_multiple_of(KERNEL_ALIGNMENT)
        && (t.storage().is_sealed() || !t.storage().is_frozen())
}

/// Calls `f` with `anys`; the kernel's result, or the error it raised. Inlined into each
/// caller: a call and a frame less per kernel call.
#[inline(always)]
fn invoke(name: &str, f: SafeCall, anys: &[TVMFFIAny]) -> Result<TVMFFIAny> {
    let num_args = i32::try_from(anys.len()).map_err(|_| {
        relaxvm::Error::value(format!(
            "kernel {name:?} takes at most {} arguments, {} were passed",
            i32::MAX,
            anys.len()
        ))
    })?;
    let mut result = TVMFFIAny::NONE;
    let called = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `f` is a kernel exported by a library that stays loaded while this function
        // exists (the caller holds it); `anys` holds `num_args` values whose DLTensors view
        // the arguments (borrowed for the whole call) or the caller's aligned copies, with
        // shapes owned by those tensors; `result` is writable. The kernel writes the tensors
        // it is given in place: never a constant (its pages are read-only, and the guard turns
        // the fault into an error), never read-only foreign memory (passed as a private copy,
        // see `viewable`), never memory a Rust reader holds (readers are scoped to one builtin
        // call, and this thread is in this call). A stale recorded error is cleared first, so
        // that only this kernel's is reported.
        unsafe { guard::clean_call(f, anys.as_ptr(), num_args, &mut result) }
    }));
    let rc = match called {
        Ok(Ok(Ok(rc))) => rc,
        Ok(Ok(Err(fault))) => {
            raised::clear();
            return Err(fault.error(&format!("kernel {name:?}")));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => -1,
    };
    if rc != 0 {
        return Err(raised::take(&format!("kernel {name:?}")));
    }
    Ok(result)
}

/// The general call: tensor arguments that are misaligned or strided go through compact,
/// aligned copies, written back after the kernel returns.
fn call_staged(name: &str, f: SafeCall, args: &[Value]) -> Result<Value> {
    let mut staged: SmallVec<[Staged; 2]> = SmallVec::new();
    let mut sources: SmallVec<[Option<Source>; WIDE_ARGS]> = SmallVec::with_capacity(args.len());
    let mut anys: SmallVec<[TVMFFIAny; WIDE_ARGS]> = SmallVec::with_capacity(args.len());
    for (i, v) in args.iter().enumerate() {
        match convert::scalar_to_ffi(v, &|| format!("argument {i} of kernel {name:?}"))? {
            Some(any) => {
                anys.push(any);
                sources.push(None);
            }
            None => {
                let t = tensor_arg(args, i);
                if viewable(t) {
                    sources.push(Some(Source::Arg(i)));
                } else {
                    // Worth knowing when tuning: a numpy view passed straight in costs a copy here.
                    // Said once per kernel: a log call may take the GIL, and this runs without it.
                    if first_copy_for(name, f as usize) {
                        log::debug!(
                            "kernel {name:?}: argument {i} ({}) is {}; passed through an aligned copy (said once per kernel)",
                            t.shape(),
                            if !t.is_contiguous() {
                                "strided"
                            } else if t.storage().is_frozen() {
                                "read-only memory"
                            } else {
                                "not 64-byte aligned"
                            }
                        );
                    }
                    let copy = Tensor::from_bytes(t.dtype(), t.shape().clone(), &t.contiguous_bytes()?)?;
                    sources.push(Some(Source::Staged(staged.len())));
                    staged.push(Staged { arg: i, copy });
                }
                anys.push(TVMFFIAny::NONE);
            }
        }
    }
    // DLTensors are built after every copy is made, so the pointers into `dls` stay valid.
    let dls: SmallVec<[DLTensor; WIDE_ARGS]> = sources
        .iter()
        .flatten()
        .map(|s| match s {
            Source::Arg(i) => convert::dl_tensor(tensor_arg(args, *i), None),
            Source::Staged(k) => convert::dl_tensor(&staged[*k].copy, None),
        })
        .collect();
    let mut next = dls.iter();
    for (any, s) in anys.iter_mut().zip(&sources) {
        if s.is_some() {
            let dl: &DLTensor = next.next().expect("one DLTensor per tensor argument");
            *any = TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, (dl as *const DLTensor).cast());
        }
    }
    let result = invoke(name, f, &anys)?;
    // Kernels do not say which arguments they write, so every staged copy goes back — except
    // into read-only memory (constants, read-only imports), where a write is refused as it is
    // everywhere else: a kernel that changed such a copy asked for an output that cannot be
    // delivered, an error rather than a result silently dropped. Only read-only arguments that
    // could not be viewed in place are compared, each once, at the cost of its copy.
    for s in &staged {
        let original = tensor_arg(args, s.arg);
        if !original.storage().is_frozen() {
            write_back(original, &s.copy)?;
        } else if changed(original, &s.copy)? {
            return Err(relaxvm::Error::value(format!(
                "kernel {name:?} wrote to argument {} (a {} tensor of shape {}), which is read-only memory \
                 (a constant or a read-only import); pass a writable tensor for its outputs",
                s.arg,
                original.dtype(),
                original.shape()
            )));
        }
    }
    convert::result_from_ffi(&result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    /// A kernel that returns the sum of its int arguments plus, for each tensor argument, its
    /// first element (an f32 or i64, truncated), and adds 1 to that element in place.
    unsafe extern "C" fn sum_and_bump(_: *mut c_void, args: *const TVMFFIAny, n: i32, result: *mut TVMFFIAny) -> i32 {
        let mut sum = 0i64;
        for i in 0..n as usize {
            // SAFETY: the caller passes `n` values.
            let a = unsafe { *args.add(i) };
            match a.type_index {
                type_index::INT => sum += a.payload as i64,
                type_index::DL_TENSOR_PTR => {
                    // SAFETY: a DLTensor the caller made, viewing a live, writable tensor of
                    // at least one element.
                    let dl = unsafe { &*(a.payload as usize as *const DLTensor) };
                    let p = dl.data.cast::<i64>();
                    // SAFETY: as above (an i64 tensor here).
                    unsafe {
                        sum += *p;
                        *p += 1;
                    }
                }
                _ => return -1,
            }
        }
        // SAFETY: the result is writable.
        unsafe { *result = TVMFFIAny::int(sum) };
        0
    }

    /// A kernel that fails without recording an error.
    unsafe extern "C" fn fails_silently(_: *mut c_void, _: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
        -1
    }

    #[test]
    fn an_error_recorded_before_a_kernel_call_is_never_reported_as_the_kernels() {
        let unset = "failed without setting an error message";
        for n in [0usize, 3, 9, WIDE_ARGS + 1] {
            let args: Vec<Value> = (0..n).map(|i| Value::Int(i as i64)).collect();
            // Stale: recorded by earlier code on this thread and never taken.
            raised::set("ValueError".into(), "stale".into());
            let e = call("k", fails_silently, &args).unwrap_err().to_string();
            assert!(e.contains(unset) && !e.contains("stale"), "{n} arguments: {e}");
            // A call that succeeds clears it too.
            raised::set_error(&relaxvm::Error::value("stale again"));
            call("k", sum_and_bump, &args).unwrap();
            assert!(raised::take_raw().is_none(), "{n} arguments");
        }
    }

    #[test]
    fn every_arity_up_to_the_wide_arrays_and_past_them_gives_the_same_call() {
        for n in [0usize, 1, 8, 9, 20, WIDE_ARGS, WIDE_ARGS + 1, 40] {
            let tensors: Vec<Tensor> = (0..n).map(|i| Tensor::from_vec([1], vec![i as i64]).unwrap()).collect();
            // Ints and tensors interleaved.
            let args: Vec<Value> =
                (0..n).map(|i| if i % 2 == 0 { Value::Int(100) } else { Value::Tensor(tensors[i].clone()) }).collect();
            let expected: i64 = (0..n).map(|i| if i % 2 == 0 { 100 } else { i as i64 }).sum();
            let got = call("k", sum_and_bump, &args).unwrap();
            assert!(matches!(got, Value::Int(s) if s == expected), "{n} arguments: {}", got.describe());
            for (i, t) in tensors.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
                assert_eq!(t.to_vec::<i64>().unwrap(), [i as i64 + 1], "{n} arguments: written in place");
            }
            // An argument a kernel cannot take is named, at any arity.
            if n > 0 {
                let mut bad = args.clone();
                bad[n - 1] = Value::str("x");
                let e = call("k", sum_and_bump, &bad).unwrap_err().to_string();
                assert!(e.contains(&format!("argument {} of kernel \"k\"", n - 1)), "{e}");
            }
        }
    }
}
