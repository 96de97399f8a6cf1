//! `rvm_vm_options`: the limits and settings of a new VM, TVM's `memory_cfg` among them, and the
//! size field that tells a caller compiled against another layout of the struct from one
//! compiled against this header.

use crate::error::{guard, rvm_error, rvm_error_code::*, CError};
use crate::input::{slice_arg, str_arg, write_out};
use relaxvm::memory_cfg::{AllocatorName, MemoryCfg, NAIVE_ALLOCATOR, POOLED_ALLOCATOR};
use relaxvm::{Allocator, Device, DeviceType, Limits};
use std::ffi::c_char;
use std::mem::size_of;
use std::ptr::{addr_of, null};

/// `memory_cfg` allocator kind: TVM's naive allocator (`VirtualMachine.NAIVE_ALLOCATOR`): every
/// allocation gets new memory.
pub const RVM_NAIVE_ALLOCATOR: i64 = 1;
/// `memory_cfg` allocator kind: TVM's pooled allocator (`VirtualMachine.POOLED_ALLOCATOR`, the
/// default): an allocation site hands out its last block again once nothing holds it.
pub const RVM_POOLED_ALLOCATOR: i64 = 2;

// The numbers are TVM's, defined once in relaxvm (cbindgen writes only literals into the header).
const _: () = assert!(RVM_NAIVE_ALLOCATOR == NAIVE_ALLOCATOR && RVM_POOLED_ALLOCATOR == POOLED_ALLOCATOR);

/// One device's allocator in a per-device `memory_cfg` (TVM's dict form).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rvm_memory_cfg_entry {
    /// The device's DLPack type (`RVM_DLPACK_CPU`, 1: the only one relaxvm runs on).
    pub device_type: i32,
    /// The device's index among devices of its type (not negative).
    pub device_id: i32,
    /// `RVM_NAIVE_ALLOCATOR` or `RVM_POOLED_ALLOCATOR`.
    pub allocator: i64,
}

/// The limits and settings of a VM. Fill it with `rvm_vm_options_init_sized(&opts, sizeof opts)`,
/// then change fields.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rvm_vm_options {
    /// `RVM_VM_OPTIONS_MAGIC`, set by `rvm_vm_options_init_sized`. `rvm_vm_create` reads this
    /// field and `struct_size` first (the first 8 bytes, which every layout of the struct has)
    /// and refuses other values with `RVM_ERROR_INVALID_ARGUMENT`, reading nothing else: the
    /// struct of the header before these fields began with `max_call_depth`, whose realistic
    /// values (below 2^32) hold 0 where `struct_size` is, and which matches both fields only if
    /// set to this exact 64-bit pattern.
    pub magic: u32,
    /// `sizeof(rvm_vm_options)` as the caller's header declares it, set by
    /// `rvm_vm_options_init_sized`: a size this library does not know (a program compiled
    /// against another relaxvm.h, whose struct has other fields) is refused as above.
    pub struct_size: u32,
    /// The deepest chain of bytecode calls before a call fails (`RVM_ERROR_STACK_OVERFLOW`).
    pub max_call_depth: u64,
    /// How many times packed functions may call back into the VM, nested.
    pub max_reentry: u64,
    /// Steps (bytecode calls and backward jumps) one call may take before it fails with
    /// `RVM_ERROR_STEP_BUDGET`; 0 is unlimited (the default).
    pub step_budget: u64,
    /// The most registers all frames may hold together (16 bytes each).
    pub max_stack_registers: u64,
    /// Allow `rvm_vm_profile` (off by default).
    pub profile: bool,
    /// The size of the process's thread pool, shared by every VM (parallel TVM kernels, large
    /// builtins): 0 leaves it as `RELAXVM_NUM_THREADS` or the number of cores sets it. The pool
    /// is created once per process: asking for another size once it exists is an error.
    pub num_threads: u32,
    /// TVM's `memory_cfg` as a string: `"naive"` or `"pooled"`, the allocator of every device;
    /// NULL (the default) when not given. At most one of this and `memory_cfg_devices` is set.
    pub memory_cfg: *const c_char,
    /// TVM's `memory_cfg` as a map: `num_memory_cfg_devices` entries, each naming a device and
    /// its allocator; a device not listed gets the pooled allocator. NULL (the default) when not
    /// given. Every entry is checked, and one device listed twice with different allocators is
    /// an error. The VM runs on CPU 0: its entry, if any, chooses its allocator.
    pub memory_cfg_devices: *const rvm_memory_cfg_entry,
    /// The number of entries at `memory_cfg_devices`.
    pub num_memory_cfg_devices: usize,
}

/// The first field of every `rvm_vm_options` that `rvm_vm_options_init_sized` filled ("RVMO" in
/// little-endian bytes).
pub const RVM_VM_OPTIONS_MAGIC: u32 = 0x4f4d_5652;

/// The size of the options struct of this header: the one layout this library reads. (A later
/// version that adds fields at the end will read this size too, as a prefix of its own.)
const OPTIONS_SIZE: usize = size_of::<rvm_vm_options>();

/// Fills `opts` with the defaults (those of `relaxvm::Limits`; no step budget, no profiling,
/// the thread pool as configured, TVM's default `memory_cfg`: the pooled allocator).
/// `struct_size` must be `sizeof(rvm_vm_options)` of the caller's header (pass `sizeof opts`): a
/// size this library does not know is `RVM_ERROR_INVALID_ARGUMENT` and nothing is written (a
/// program compiled against another relaxvm.h would otherwise get a struct of another layout).
///
/// Ownership: writes `*opts`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_options_init_sized(opts: *mut rvm_vm_options, struct_size: usize) -> *mut rvm_error {
    guard(|| {
        check_size(struct_size, "rvm_vm_options_init_sized: struct_size")?;
        let d = Limits::default();
        let o = rvm_vm_options {
            magic: RVM_VM_OPTIONS_MAGIC,
            struct_size: OPTIONS_SIZE as u32,
            max_call_depth: d.max_call_depth as u64,
            max_reentry: d.max_reentry as u64,
            step_budget: 0,
            max_stack_registers: d.max_stack_registers as u64,
            profile: false,
            num_threads: 0,
            memory_cfg: null(),
            memory_cfg_devices: null(),
            num_memory_cfg_devices: 0,
        };
        // SAFETY: `write_out` checks for NULL; the caller passes a pointer writable for
        // `struct_size` bytes, which is the struct's size (checked above).
        unsafe { write_out(opts, o, "rvm_vm_options_init_sized") }
    })
}

/// What a wrong magic number or size means, and the fix.
const ANOTHER_HEADER: &str = "the program was compiled against another relaxvm.h (recompile it), \
                              or did not fill the options with rvm_vm_options_init_sized(&opts, sizeof opts)";

fn check_size(size: usize, what: &str) -> Result<(), CError> {
    if size == OPTIONS_SIZE {
        return Ok(());
    }
    Err(CError::invalid(format!(
        "{what} is {size}, expected {OPTIONS_SIZE} (sizeof(rvm_vm_options) in this library's relaxvm.h): {ANOTHER_HEADER}"
    )))
}

/// The fields of a caller's `rvm_vm_options`, read one by one (see [`read_options`]).
struct Fields {
    max_call_depth: u64,
    max_reentry: u64,
    step_budget: u64,
    max_stack_registers: u64,
    profile: bool,
    num_threads: u32,
    memory_cfg: *const c_char,
    memory_cfg_devices: *const rvm_memory_cfg_entry,
    num_memory_cfg_devices: usize,
}

/// What `rvm_vm_create` takes from its options.
pub(crate) struct VmSettings {
    /// The limits.
    pub limits: Limits,
    /// Whether `rvm_vm_profile` is allowed.
    pub profile: bool,
    /// The thread pool's size, 0 to leave it.
    pub num_threads: u32,
    /// The allocator `memory_cfg` chose for the VM's device.
    pub allocator: Allocator,
}

/// The device every VM of the C API runs on (the API has no device option).
pub(crate) const VM_DEVICE: Device = Device::cpu(0);

fn usize_of(v: u64, field: &str) -> Result<usize, CError> {
    usize::try_from(v)
        .map_err(|_| CError::invalid(format!("rvm_vm_create: opts->{field} = {v} does not fit this machine's size_t")))
}

/// The settings of `opts` (NULL: the defaults), checked.
///
/// # Safety
/// `opts` is NULL or points to at least 8 readable bytes and, when those hold the magic number
/// and this header's struct size, to a whole `rvm_vm_options` whose pointers are valid as
/// documented.
pub(crate) unsafe fn read_options(opts: *const rvm_vm_options) -> Result<VmSettings, CError> {
    let defaults = Limits::default();
    if opts.is_null() {
        return Ok(VmSettings { limits: defaults, profile: false, num_threads: 0, allocator: Allocator::Pooled });
    }
    if !(opts as usize).is_multiple_of(std::mem::align_of::<rvm_vm_options>()) {
        return Err(CError::invalid(format!("rvm_vm_create: opts pointer {opts:?} is not aligned")));
    }
    // SAFETY: non-null and aligned; the first two fields (8 bytes) lie within any version of the
    // struct (an older layout began with a u64), so reading them alone is in bounds whatever
    // the caller was compiled against.
    let (magic, size) = unsafe { (addr_of!((*opts).magic).read(), addr_of!((*opts).struct_size).read()) };
    if magic != RVM_VM_OPTIONS_MAGIC {
        return Err(CError::invalid(format!(
            "rvm_vm_create: opts->magic is {magic:#x}, expected RVM_VM_OPTIONS_MAGIC ({RVM_VM_OPTIONS_MAGIC:#x}): {ANOTHER_HEADER}"
        )));
    }
    check_size(size as usize, "rvm_vm_create: opts->struct_size")?;
    // SAFETY: the size proves the caller's struct has this layout. Each field is read on its
    // own, and `profile` as a byte (any nonzero is true): a copy of the whole struct would be
    // undefined behaviour when C stored another value than 0 or 1 in that `bool`.
    let o = unsafe {
        Fields {
            max_call_depth: addr_of!((*opts).max_call_depth).read(),
            max_reentry: addr_of!((*opts).max_reentry).read(),
            step_budget: addr_of!((*opts).step_budget).read(),
            max_stack_registers: addr_of!((*opts).max_stack_registers).read(),
            profile: addr_of!((*opts).profile).cast::<u8>().read() != 0,
            num_threads: addr_of!((*opts).num_threads).read(),
            memory_cfg: addr_of!((*opts).memory_cfg).read(),
            memory_cfg_devices: addr_of!((*opts).memory_cfg_devices).read(),
            num_memory_cfg_devices: addr_of!((*opts).num_memory_cfg_devices).read(),
        }
    };
    let limits = Limits {
        max_call_depth: usize_of(o.max_call_depth, "max_call_depth")?,
        max_reentry: usize_of(o.max_reentry, "max_reentry")?,
        step_budget: (o.step_budget != 0).then_some(o.step_budget),
        max_stack_registers: usize_of(o.max_stack_registers, "max_stack_registers")?,
    };
    // SAFETY: forwarded to the caller (the pointers of a filled struct are valid or NULL).
    let cfg = unsafe { memory_cfg(&o) }?;
    let allocator = cfg
        .allocator_for(VM_DEVICE)
        .map_err(|e| CError::new(RVM_ERROR_VALUE, format!("rvm_vm_create: opts->memory_cfg: {e}")))?;
    Ok(VmSettings { limits, profile: o.profile, num_threads: o.num_threads, allocator })
}

/// TVM's `memory_cfg` of `o`, in relaxvm's form (whose rules and errors it then applies).
///
/// # Safety
/// `o.memory_cfg` is NULL or a NUL-terminated string; `o.memory_cfg_devices` is NULL or points
/// to `o.num_memory_cfg_devices` entries.
unsafe fn memory_cfg(o: &Fields) -> Result<MemoryCfg, CError> {
    let devices_given = !o.memory_cfg_devices.is_null() || o.num_memory_cfg_devices != 0;
    if !o.memory_cfg.is_null() {
        if devices_given {
            return Err(CError::invalid(
                "rvm_vm_create: opts->memory_cfg and opts->memory_cfg_devices are both set; TVM's memory_cfg is a string or a per-device map, not both",
            ));
        }
        // SAFETY: the caller passes a NUL-terminated string.
        let name = unsafe { str_arg(o.memory_cfg, "rvm_vm_create: opts->memory_cfg") }?;
        return Ok(MemoryCfg::All(AllocatorName::Name(name.to_string())));
    }
    if !devices_given {
        return Ok(MemoryCfg::Default);
    }
    // SAFETY: the caller passes this many entries.
    let entries = unsafe {
        slice_arg(o.memory_cfg_devices, o.num_memory_cfg_devices, "rvm_vm_create: opts->memory_cfg_devices")
    }?;
    let mut map = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let at = || format!("rvm_vm_create: opts->memory_cfg_devices[{i}]");
        let device_type = DeviceType::from_code(e.device_type)
            .map_err(|err| CError::new(RVM_ERROR_VALUE, format!("{}: {}", at(), CError::from(err).message)))?;
        if e.device_id < 0 {
            return Err(CError::new(
                RVM_ERROR_VALUE,
                format!("{}: device_id is {}; a device id is not negative", at(), e.device_id),
            ));
        }
        map.push((Device { device_type, device_id: e.device_id }, AllocatorName::Kind(e.allocator)));
    }
    Ok(MemoryCfg::PerDevice(map))
}
