//! Calls from kernels into packed functions: the arguments a function receives are copies,
//! so what it keeps never reaches the kernel's memory, and what it writes reaches the kernel.

use super::{function_call, lookup_from_imports};
use crate::ffi::abi::{type_index, DLDevice, DLTensor, TVMFFIAny};
use crate::ffi::convert::dl_dtype;
use crate::ffi::raised;
use relaxvm::{registry, DataType, PackedFunc, Tensor, Value};
use std::ffi::{c_void, CString};
use std::sync::Mutex;

/// A DLTensor over `data` (f32) with `shape` and optional `strides`.
fn dl(data: *const f32, shape: &mut [i64], strides: Option<&mut [i64]>) -> DLTensor {
    DLTensor {
        data: data.cast_mut().cast(),
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: dl_dtype(DataType::F32),
        shape: shape.as_mut_ptr(),
        strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}

fn arg(t: &DLTensor) -> TVMFFIAny {
    TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, (t as *const DLTensor).cast())
}

/// Registers `f` under `name` and calls it as a kernel would; the return code and the error
/// raised, if any.
fn call_back(name: &str, f: PackedFunc, args: &[TVMFFIAny]) -> (i32, Option<String>) {
    registry::register_global(f, true).unwrap();
    let cname = CString::new(name).unwrap();
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and a writable handle slot.
    assert_eq!(unsafe { lookup_from_imports(std::ptr::null_mut(), cname.as_ptr(), &mut handle) }, 0);
    let mut result = TVMFFIAny::NONE;
    raised::clear();
    // SAFETY: a handle from `lookup_from_imports`, `args.len()` live arguments, a writable result.
    let rc = unsafe { function_call(handle, args.as_ptr(), args.len() as i32, &mut result) };
    let err = (rc != 0).then(|| raised::take("callback").to_string());
    (rc, err)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn a_kept_tensor_is_a_copy_and_the_output_reaches_the_kernel() {
    static KEPT: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());
    let sort = PackedFunc::new("test.callbacks.sort", |_, args| {
        let (Value::Tensor(x), Value::Tensor(out)) = (&args[0], &args[1]) else { panic!("two tensors") };
        let mut v = f32s(x);
        v.sort_by(f32::total_cmp);
        let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
        out.storage().write(out.byte_offset(), &bytes)?;
        KEPT.lock().unwrap().extend([x.clone(), out.clone()]);
        Ok(Value::Null)
    });
    // The kernel's memory: a workspace it frees after the call.
    let input = vec![3.0f32, 1.0, 2.0, 0.5];
    let mut output = vec![0.0f32; 4];
    let (mut s1, mut s2) = ([4i64], [4i64]);
    let (a, b) = (dl(input.as_ptr(), &mut s1, None), dl(output.as_mut_ptr(), &mut s2, None));
    let (rc, err) = call_back("test.callbacks.sort", sort, &[arg(&a), arg(&b)]);
    assert_eq!((rc, err), (0, None));
    assert_eq!(output, [0.5, 1.0, 2.0, 3.0]);
    let kept = std::mem::take(&mut *KEPT.lock().unwrap());
    // The kept tensors own their memory: they are not the kernel's buffers.
    let range = |v: &Vec<f32>| v.as_ptr() as usize..v.as_ptr() as usize + 16;
    for t in &kept {
        assert!(
            !range(&input).contains(&(t.data_ptr() as usize)) && !range(&output).contains(&(t.data_ptr() as usize))
        );
    }
    // The kernel frees (here: overwrites, then frees) its memory; the kept values stay.
    output.iter_mut().for_each(|x| *x = f32::NAN);
    drop((input, output));
    assert_eq!(f32s(&kept[0]), [3.0, 1.0, 2.0, 0.5]);
    assert_eq!(f32s(&kept[1]), [0.5, 1.0, 2.0, 3.0]);
    // Writing a kept tensor later is writing its own copy.
    kept[1].storage().write(0, &9.0f32.to_le_bytes()).unwrap();
    assert_eq!(f32s(&kept[1])[0], 9.0);
}

/// Read-only memory (a `static`): writing to it would be a SIGSEGV.
static READ_ONLY: [f32; 3] = [1.0, 2.0, 3.0];

#[test]
fn unchanged_memory_is_never_written_and_one_dltensor_passed_twice_is_one_tensor() {
    static SAME: Mutex<Option<bool>> = Mutex::new(None);
    let f = PackedFunc::new("test.callbacks.reads", |_, args| {
        let (Value::Tensor(x), Value::Tensor(y)) = (&args[0], &args[1]) else { panic!("two tensors") };
        *SAME.lock().unwrap() = Some(x.ptr_eq(y));
        assert_eq!(f32s(x), [1.0, 2.0, 3.0]);
        Ok(Value::Int(7))
    });
    let mut shape = [3i64];
    let t = dl(READ_ONLY.as_ptr(), &mut shape, None);
    assert_eq!(call_back("test.callbacks.reads", f, &[arg(&t), arg(&t)]), (0, None));
    assert_eq!(*SAME.lock().unwrap(), Some(true));
}

#[test]
fn strided_tensors_are_gathered_and_only_changed_elements_go_back() {
    let f = PackedFunc::new("test.callbacks.negate", |_, args| {
        let Value::Tensor(x) = &args[0] else { panic!("a tensor") };
        assert!(x.is_contiguous());
        let v: Vec<u8> = f32s(x).iter().map(|f| if *f > 2.0 { -f } else { *f }).flat_map(|f| f.to_le_bytes()).collect();
        x.storage().write(0, &v)?;
        Ok(Value::Null)
    });
    // Column 0 of a 3x2 matrix: elements 0, 2, 4; the others must stay as they were.
    let mut memory = vec![1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0];
    let (mut shape, mut strides) = ([3i64], [2i64]);
    let t = dl(memory.as_mut_ptr(), &mut shape, Some(&mut strides));
    assert_eq!(call_back("test.callbacks.negate", f, &[arg(&t)]), (0, None));
    assert_eq!(memory, [1.0, 10.0, 2.0, 20.0, -3.0, 30.0]);
}

#[test]
fn what_a_failing_function_wrote_goes_back_and_bad_dltensors_are_refused() {
    let f = PackedFunc::new("test.callbacks.fails", |_, args| {
        let Value::Tensor(x) = &args[0] else { panic!("a tensor") };
        x.storage().write(0, &5.0f32.to_le_bytes())?;
        Err(relaxvm::Error::value("it failed after writing"))
    });
    let mut memory = vec![0.0f32; 2];
    let mut shape = [2i64];
    let t = dl(memory.as_mut_ptr(), &mut shape, None);
    let (rc, err) = call_back("test.callbacks.fails", f.clone(), &[arg(&t)]);
    assert_eq!(rc, -1);
    assert!(err.unwrap().contains("it failed after writing"));
    assert_eq!(memory, [5.0, 0.0]);
    // Null data, negative strides, another device: refused before the call, naming what.
    let mut null = dl(std::ptr::null(), &mut shape, None);
    let (rc, err) = call_back("test.callbacks.fails", f.clone(), &[arg(&null)]);
    assert_eq!(rc, -1);
    assert!(err.unwrap().contains("null data"));
    let mut negative = [-1i64];
    let strided = dl(memory.as_ptr(), &mut shape, Some(&mut negative));
    let (_, err) = call_back("test.callbacks.fails", f.clone(), &[arg(&strided)]);
    assert!(err.unwrap().contains("negative or overflowing"));
    null.data = memory.as_mut_ptr().cast();
    null.byte_offset = 1 << 63;
    let (_, err) = call_back("test.callbacks.fails", f.clone(), &[arg(&null)]);
    assert!(err.unwrap().contains("byte_offset 9223372036854775808"));
    null.byte_offset = u64::MAX - 3;
    let (_, err) = call_back("test.callbacks.fails", f.clone(), &[arg(&null)]);
    assert!(err.unwrap().contains("overflow"));
    null.byte_offset = 0;
    null.device.device_type = 2;
    let (_, err) = call_back("test.callbacks.fails", f, &[arg(&null)]);
    assert!(err.unwrap().contains("device type 2"));
    assert_eq!(memory, [5.0, 0.0]);
}

#[test]
fn workspaces_small_and_mapped_are_aligned_writable_and_freed() {
    use super::{alloc_workspace, free_workspace, MAPPED_WORKSPACE};
    // Below, at and above the size from which workspaces are mapped (the header counts).
    for n in [1usize, 4096, MAPPED_WORKSPACE - 64, MAPPED_WORKSPACE, 3 << 20] {
        let p = alloc_workspace(1, 0, n as u64, 2, 32).cast::<u8>();
        assert!(!p.is_null() && (p as usize).is_multiple_of(64), "{n}: {p:p}");
        // SAFETY: the workspace holds `n` bytes.
        unsafe {
            std::ptr::write_bytes(p, 0xab, n);
            assert_eq!((*p, *p.add(n - 1)), (0xab, 0xab));
        }
        // SAFETY: returned by alloc_workspace, freed once.
        assert_eq!(unsafe { free_workspace(1, 0, p.cast()) }, 0);
    }
    // More than the address space holds: null and a MemoryError, never an abort.
    raised::clear();
    assert!(alloc_workspace(1, 0, u64::MAX - 8, 2, 32).is_null());
    assert!(raised::take("w").to_string().contains("cannot allocate a workspace"));
    assert!(alloc_workspace(1, 0, 1 << 62, 2, 32).is_null());
    assert!(raised::take("w").to_string().contains("cannot allocate a workspace"));
}

#[test]
fn a_freed_mapped_workspace_goes_back_to_the_process_cache() {
    use super::{alloc_workspace, free_workspace, WORKSPACE_HEADER};
    use crate::ffi::mapped_blocks::{MAX_BLOCKS, MAX_BYTES, PROCESS};
    // The policy is tested on a cache of its own (mapped_blocks' tests); here, that the
    // workspace functions use the process's cache (review R-pool-1): a freed block is kept
    // there and the next request of its size gets it back, its bytes as left (or, with the
    // cache off, it is unmapped and nothing is kept). The size is one no other test asks for.
    let n = 777 * 4096 + 100;
    let p = alloc_workspace(1, 0, n as u64, 2, 32);
    assert!(!p.is_null());
    let base = p.cast::<u8>().wrapping_sub(WORKSPACE_HEADER);
    // SAFETY: the workspace holds `n` bytes; returned by alloc_workspace, freed once.
    unsafe {
        std::ptr::write_bytes(p.cast::<u8>(), 0xcd, n);
        assert_eq!(free_workspace(1, 0, p), 0);
    }
    let (blocks, bytes) = PROCESS.kept();
    assert!(blocks <= MAX_BLOCKS && bytes <= MAX_BYTES, "{blocks} blocks, {bytes} bytes");
    if !relaxvm::block_cache::enabled() {
        assert!(!PROCESS.holds(base));
        assert_eq!((blocks, bytes), (0, 0), "RELAXVM_BLOCK_CACHE=0: nothing is kept");
        return;
    }
    assert!(PROCESS.holds(base), "the freed workspace's block is kept by the process cache");
    let again = alloc_workspace(1, 0, n as u64, 2, 32);
    assert_eq!(again, p, "the next request of the size gets the kept block");
    // SAFETY: the same block, `n` bytes; freed once below.
    unsafe {
        assert_eq!(*again.cast::<u8>().add(n - 1), 0xcd, "its bytes as the last user left them");
        assert_eq!(free_workspace(1, 0, again), 0);
    }
}
