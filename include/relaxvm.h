/* relaxvm.h: the C API of relaxvm. Generated from capi/src by cbindgen: do not edit; run
 * `RELAXVM_UPDATE_HEADER=1 cargo test -p relaxvm-capi --test header` after changing the Rust
 * side. Ownership and thread-safety rules: docs/c-api.md and each function's comment.
 *
 * The DLPack 1.x declarations (DLTensor, DLManagedTensorVersioned...) are included here, laid
 * out as dlpack.h declares them: include either this header or dlpack.h's definitions in one
 * translation unit, not both. */

#ifndef RELAXVM_H
#define RELAXVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// `DLPACK_FLAG_BITMASK_READ_ONLY` of dlpack.h, for C (the same as
// `relaxvm::dlpack::DLPACK_FLAG_BITMASK_READ_ONLY`, checked when compiling).
#define RVM_DLPACK_FLAG_READ_ONLY 1

// The DLPack major version relaxvm exchanges (`DLManagedTensorVersioned.version.major`).
#define RVM_DLPACK_MAJOR_VERSION 1

// `kDLCPU`, the one device type relaxvm's C API exchanges.
#define RVM_DLPACK_CPU 1

// `rvm_load_options.native_libraries`: open no native library an `.rvx` references (default).
#define RVM_NATIVE_REFUSE 0

// `rvm_load_options.native_libraries`: open those lying at or directly in `allowed_paths`.
#define RVM_NATIVE_ALLOW_LISTED 1

// `rvm_load_options.native_libraries`: open any library the file references (still checked by
// hash) — for files trusted as much as the libraries themselves.
#define RVM_NATIVE_ANY 2

// The most elements an array argument may have (2^32): larger counts are refused before any
// pointer is read (a negative `int` cast to `size_t` lands far above it).
#define RVM_MAX_ARRAY_ELEMENTS 4294967296

// How deeply tuples made with `rvm_value_new_tuple` may nest (Python's `MAX_NESTING` too): Rust
// code that walks values (printing, signature checks, builtins) recurses per level, and the
// limit keeps that within any thread's stack.
#define RVM_MAX_TUPLE_NESTING 1000

// `rvm_vm_profile` format: a fixed-width table, most time first.
#define RVM_PROFILE_TABLE 0

// `rvm_vm_profile` format: CSV, one row per callee, times in nanoseconds.
#define RVM_PROFILE_CSV 1

// `rvm_vm_profile` format: JSON `{"function", "total_ns", "calls": [...]}`.
#define RVM_PROFILE_JSON 2

// `rvm_vm_profile` format: the Chrome trace event format (ui.perfetto.dev).
#define RVM_PROFILE_CHROME_TRACE 3

// `memory_cfg` allocator kind: TVM's naive allocator (`VirtualMachine.NAIVE_ALLOCATOR`): every
// allocation gets new memory.
#define RVM_NAIVE_ALLOCATOR 1

// `memory_cfg` allocator kind: TVM's pooled allocator (`VirtualMachine.POOLED_ALLOCATOR`, the
// default): an allocation site hands out its last block again once nothing holds it.
#define RVM_POOLED_ALLOCATOR 2

// The first field of every `rvm_vm_options` that `rvm_vm_options_init_sized` filled ("RVMO" in
// little-endian bytes).
#define RVM_VM_OPTIONS_MAGIC 1330468434

// What went wrong, as `rvm_error_get_code` returns it.
typedef enum rvm_error_code {
  // No error (never the code of an error object; `rvm_error_get_code(NULL)` returns it).
  RVM_OK = 0,
  // A C API misuse: a NULL or wrong handle, a freed handle, invalid UTF-8, a size too large,
  // an unknown option value.
  RVM_ERROR_INVALID_ARGUMENT = 1,
  // A value of the wrong type.
  RVM_ERROR_TYPE = 2,
  // A value of the right type but unacceptable.
  RVM_ERROR_VALUE = 3,
  // An index out of range.
  RVM_ERROR_INDEX = 4,
  // A call with the wrong number of arguments.
  RVM_ERROR_ARITY = 5,
  // Memory that could not be allocated.
  RVM_ERROR_ALLOC = 6,
  // Integer overflow or division by zero.
  RVM_ERROR_ARITHMETIC = 7,
  // A function that neither the executable, its libraries nor the registry provides.
  RVM_ERROR_UNKNOWN_FUNCTION = 8,
  // Functions a native library would provide, which was not opened (no consent).
  RVM_ERROR_LIBRARY_NOT_LOADED = 9,
  // An error raised by a kernel of a native library, with its own kind in the message.
  RVM_ERROR_RAISED = 10,
  // A function name registered twice without permission to override.
  RVM_ERROR_ALREADY_REGISTERED = 11,
  // Calls nested too deep (bytecode frames or native stack).
  RVM_ERROR_STACK_OVERFLOW = 12,
  // The call was interrupted (`rvm_vm_interrupt`).
  RVM_ERROR_INTERRUPTED = 13,
  // The VM's step budget ran out.
  RVM_ERROR_STEP_BUDGET = 14,
  // An executable that fails verification.
  RVM_ERROR_INVALID_EXECUTABLE = 15,
  // A file that is not a valid executable, model or library.
  RVM_ERROR_FORMAT = 16,
  // An I/O failure.
  RVM_ERROR_IO = 17,
  // A panic inside the runtime or a packed function, caught.
  RVM_ERROR_PANIC = 18,
  // The VM is running a call on another thread (or this call would re-enter it).
  RVM_ERROR_BUSY = 19,
  // What this build of the library does not provide.
  RVM_ERROR_UNSUPPORTED = 20,
  // Any other error (a registered C function may return this code).
  RVM_ERROR_OTHER = 21,
} rvm_error_code;

// What kind of value an `rvm_value` holds.
typedef enum rvm_value_kind {
  // Not a live value handle.
  RVM_VALUE_INVALID = -1,
  // No value (None).
  RVM_VALUE_NULL = 0,
  // A 64-bit signed integer.
  RVM_VALUE_INT = 1,
  // A 64-bit float.
  RVM_VALUE_FLOAT = 2,
  // A boolean.
  RVM_VALUE_BOOL = 3,
  // A UTF-8 string.
  RVM_VALUE_STR = 4,
  // A shape (a tuple of int64 dimensions).
  RVM_VALUE_SHAPE = 5,
  // A tensor (exchanged as DLPack).
  RVM_VALUE_TENSOR = 6,
  // A tuple of values.
  RVM_VALUE_TUPLE = 7,
  // A function or closure (from `rvm_vm_get_function`, or returned by a call).
  RVM_VALUE_FUNCTION = 8,
  // Another object (a data type, a device, raw storage...), opaque to C.
  RVM_VALUE_OTHER = 9,
} rvm_value_kind;

// An error object: its code and message, owned by whoever holds the handle.
typedef struct rvm_error rvm_error;

// A loaded program. Immutable: any number of VMs, on any threads, may share it.
typedef struct rvm_executable rvm_executable;

// A value held by C. Values are immutable: a tensor's elements may change (it shares memory),
// the value itself does not.
typedef struct rvm_value rvm_value;

// A VM: registers, frames and limits of its own, sharing the executable's program and
// constants. One call runs on it at a time.
typedef struct rvm_vm rvm_vm;

// A C function callable from bytecode: it reads its `nargs` arguments at `args` and either
// writes a result to `*result` (a value it made; leaving it NULL returns null) and returns
// NULL, or returns an error (from `rvm_error_new`).
//
// Ownership: the arguments are borrowed for the call (do not free them; `rvm_value_clone` one
// to keep it); the result and the error are handed to relaxvm. Thread safety: it may be called
// on any thread (a VM's calling thread, or a pool thread for a parallel TVM kernel's callback)
// and concurrently.
//
// It must return: a C++ exception thrown out of it ends the process (Rust cannot unwind foreign
// exceptions: catch everything and return `rvm_error_new(...)`, and declare it `noexcept`), and
// a `longjmp` out of it skips relaxvm's cleanup and leaves the VM busy for good (every later
// call `RVM_ERROR_BUSY`, `rvm_vm_free` unable to free it). The same holds for `rvm_free_fn` and
// DLPack deleters given to relaxvm.
typedef struct rvm_error *(*rvm_packed_fn)(void *user_data,
                                           const struct rvm_value *const *args,
                                           size_t nargs,
                                           struct rvm_value **result);

// Releases a registered function's `user_data` when the registry drops the function.
typedef void (*rvm_free_fn)(void *user_data);

// `DLPackVersion`: the DLPack ABI version a managed tensor follows.
typedef struct DLPackVersion {
  // Incompatible changes bump it (1 for DLPack 1.x).
  uint32_t major;
  // Compatible additions bump it.
  uint32_t minor;
} DLPackVersion;

// `DLDevice`.
typedef struct DLDevice {
  // `kDLCPU` = 1.
  int32_t device_type;
  // The device ordinal.
  int32_t device_id;
} DLDevice;

// `DLDataType`.
typedef struct DLDataType {
  // `kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBfloat` 4, `kDLBool` 6.
  uint8_t code;
  // Bits per lane.
  uint8_t bits;
  // Lanes (1 for scalars).
  uint16_t lanes;
} DLDataType;

// `DLTensor`: a borrowed view of tensor memory.
typedef struct DLTensor {
  // The data pointer (relaxvm passes the element at the view's origin).
  void *data;
  // Where the memory lives.
  struct DLDevice device;
  // The number of dimensions.
  int32_t ndim;
  // The element type.
  struct DLDataType dtype;
  // `ndim` extents.
  int64_t *shape;
  // `ndim` strides in elements, or null for a compact row-major tensor.
  int64_t *strides;
  // Bytes from `data` to the first element.
  uint64_t byte_offset;
} DLTensor;

// `DLManagedTensorVersioned` (DLPack 1.x): a tensor handed from a producer to a consumer, who
// calls `deleter` once when done with it.
typedef struct DLManagedTensorVersioned {
  // The DLPack version of this structure.
  struct DLPackVersion version;
  // The producer's context (what keeps the memory alive).
  void *manager_ctx;
  // Frees the tensor and its context; null when nothing is to be freed.
  void (*deleter)(struct DLManagedTensorVersioned*);
  // Bit flags: [`DLPACK_FLAG_BITMASK_READ_ONLY`], [`DLPACK_FLAG_BITMASK_IS_COPIED`].
  uint64_t flags;
  // The tensor.
  struct DLTensor dl_tensor;
} DLManagedTensorVersioned;

// How to load an executable. Fill it with `rvm_load_options_init`, then change fields.
typedef struct rvm_load_options {
  // Which native libraries (TVM kernels) a `.rvx` that references them may open, running
  // their code: `RVM_NATIVE_REFUSE` (the default), `RVM_NATIVE_ALLOW_LISTED` or
  // `RVM_NATIVE_ANY`. Naming a TVM `.so` to load is the consent to open that file, and only
  // it, whatever this says.
  uint32_t native_libraries;
  // For `RVM_NATIVE_ALLOW_LISTED`: files, or folders whose direct entries are allowed.
  const char *const *allowed_paths;
  // How many `allowed_paths` there are.
  size_t num_allowed_paths;
  // The largest file to read, in bytes (16 GiB by default); larger files are refused before
  // being read.
  uint64_t max_input_size;
  // Memory-map a `.rvx` instead of reading it (faster for large constants, but the file must
  // not change while the executable lives). Off by default.
  bool mmap;
} rvm_load_options;

// One device's allocator in a per-device `memory_cfg` (TVM's dict form).
typedef struct rvm_memory_cfg_entry {
  // The device's DLPack type (`RVM_DLPACK_CPU`, 1: the only one relaxvm runs on).
  int32_t device_type;
  // The device's index among devices of its type (not negative).
  int32_t device_id;
  // `RVM_NAIVE_ALLOCATOR` or `RVM_POOLED_ALLOCATOR`.
  int64_t allocator;
} rvm_memory_cfg_entry;

// The limits and settings of a VM. Fill it with `rvm_vm_options_init_sized(&opts, sizeof opts)`,
// then change fields.
typedef struct rvm_vm_options {
  // `RVM_VM_OPTIONS_MAGIC`, set by `rvm_vm_options_init_sized`. `rvm_vm_create` reads this
  // field and `struct_size` first (the first 8 bytes, which every layout of the struct has)
  // and refuses other values with `RVM_ERROR_INVALID_ARGUMENT`, reading nothing else: the
  // struct of the header before these fields began with `max_call_depth`, whose realistic
  // values (below 2^32) hold 0 where `struct_size` is, and which matches both fields only if
  // set to this exact 64-bit pattern.
  uint32_t magic;
  // `sizeof(rvm_vm_options)` as the caller's header declares it, set by
  // `rvm_vm_options_init_sized`: a size this library does not know (a program compiled
  // against another relaxvm.h, whose struct has other fields) is refused as above.
  uint32_t struct_size;
  // The deepest chain of bytecode calls before a call fails (`RVM_ERROR_STACK_OVERFLOW`).
  uint64_t max_call_depth;
  // How many times packed functions may call back into the VM, nested.
  uint64_t max_reentry;
  // Steps (bytecode calls and backward jumps) one call may take before it fails with
  // `RVM_ERROR_STEP_BUDGET`; 0 is unlimited (the default).
  uint64_t step_budget;
  // The most registers all frames may hold together (16 bytes each).
  uint64_t max_stack_registers;
  // Allow `rvm_vm_profile` (off by default).
  bool profile;
  // The size of the process's thread pool, shared by every VM (parallel TVM kernels, large
  // builtins): 0 leaves it as `RELAXVM_NUM_THREADS` or the number of cores sets it. The pool
  // is created once per process: asking for another size once it exists is an error.
  uint32_t num_threads;
  // TVM's `memory_cfg` as a string: `"naive"` or `"pooled"`, the allocator of every device;
  // NULL (the default) when not given. At most one of this and `memory_cfg_devices` is set.
  const char *memory_cfg;
  // TVM's `memory_cfg` as a map: `num_memory_cfg_devices` entries, each naming a device and
  // its allocator; a device not listed gets the pooled allocator. NULL (the default) when not
  // given. Every entry is checked, and one device listed twice with different allocators is
  // an error. The VM runs on CPU 0: its entry, if any, chooses its allocator.
  const struct rvm_memory_cfg_entry *memory_cfg_devices;
  // The number of entries at `memory_cfg_devices`.
  size_t num_memory_cfg_devices;
} rvm_vm_options;



#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The version of this library, `"MAJOR.MINOR.PATCH"` (a static string).
const char *rvm_version(void);

// Registers `f` in the process-wide registry as packed function `name`, for every VM created
// afterwards (`rvm_vm_create` resolves names when the VM is made). Fails with
// `RVM_ERROR_ALREADY_REGISTERED` if `name` exists and `allow_override` is false; overriding a
// builtin replaces it for VMs made afterwards.
//
// Ownership: borrows `name`; on success the registry owns `user_data` and calls
// `free_user_data(user_data)` (if not NULL) once the function is replaced and no VM made before
// uses it any more, holding no lock of relaxvm's (it may call the API); on error nothing is kept
// (and `free_user_data` is not called). Thread safety: any thread; `f` must be callable
// from any thread, concurrently.
struct rvm_error *rvm_register_func(const char *name,
                                    rvm_packed_fn f,
                                    void *user_data,
                                    rvm_free_fn free_user_data,
                                    bool allow_override);

// Registers `f` under `name` in TVM's table of host functions for `R.call_py_func` (a program
// compiled with `R.call_py_func("name", args)` calls it with the items of `args`): the table
// `vm.builtin.register_py_func` fills, process-wide, which every VM reads at each call (VMs
// made before see it too). A function registered under `name` before is replaced, as TVM's
// `register_py_func` does. `vm.builtin.clear_py_func_registry` empties the table.
//
// Ownership: borrows `name`; on success the table owns `user_data` and calls
// `free_user_data(user_data)` (if not NULL) once the function is replaced or cleared and no
// running call uses it, holding no lock of relaxvm's; on error nothing is kept. Thread
// safety: any thread; `f` must be callable from any thread, concurrently.
struct rvm_error *rvm_register_py_func(const char *name,
                                       rvm_packed_fn f,
                                       void *user_data,
                                       rvm_free_fn free_user_data);

// A tensor value viewing the memory of DLPack tensor `tensor` (CPU, one lane, any dtype
// relaxvm knows, non-negative strides), without copying. Flagged read-only, it is imported
// read-only: relaxvm never writes it.
//
// Ownership: on success relaxvm takes `tensor` and calls its deleter (from any thread) when the
// last value, VM register or exported view using the memory is gone; `*out` is a new value the
// caller owns. On error nothing is taken: the caller still owns `tensor`.
// Thread safety: any thread.
struct rvm_error *rvm_value_from_dlpack(struct DLManagedTensorVersioned *tensor,
                                        struct rvm_value **out);

// A DLPack view of tensor value `v`, without copying: `(*out)->flags` has
// `DLPACK_FLAG_BITMASK_READ_ONLY` when the memory must not be written (the program's constants).
//
// Ownership: borrows `v`; on success the caller owns `*out` and must call `(*out)->deleter(*out)`
// once (from any thread), which keeps the memory alive until then, also after `v` is freed.
// Thread safety: any thread.
struct rvm_error *rvm_value_to_dlpack(const struct rvm_value *v,
                                      struct DLManagedTensorVersioned **out);

// The code of `error`; `RVM_OK` for NULL, `RVM_ERROR_INVALID_ARGUMENT` for a pointer that is
// not a live error object.
//
// Ownership: borrows `error`. Thread safety: any thread.
enum rvm_error_code rvm_error_get_code(const struct rvm_error *error);

// The message of `error`, NUL-terminated UTF-8: what was expected, what was found, and where.
// A static text for NULL (`"no error"`) or a pointer that is not a live error object.
//
// Ownership: the string belongs to `error` and lives until `rvm_error_free(error)`.
// Thread safety: any thread.
const char *rvm_error_message(const struct rvm_error *error);

// The name of `code` (`"RVM_ERROR_TYPE"`...), a static string; `"RVM_ERROR_UNKNOWN_CODE"` for
// a number that is no code.
const char *rvm_error_code_name(uint32_t code);

// Frees `error`. NULL is allowed (nothing happens); so is a pointer that is not a live error
// object (nothing happens: a double free is detected and ignored).
//
// Ownership: takes `error`. Thread safety: any thread, not concurrently with other uses of
// `error`.
void rvm_error_free(struct rvm_error *error);

// A new error object, for a registered C function to return: `code` (an `rvm_error_code`;
// another number becomes `RVM_ERROR_OTHER`) and `message` (NUL-terminated; invalid UTF-8 is
// replaced, NULL becomes an empty message). Returns NULL only if relaxvm itself panicked
// while making it (out of memory, say).
//
// Ownership: the caller owns the result (returning it from a packed function hands it to
// relaxvm). Thread safety: any thread.
struct rvm_error *rvm_error_new(uint32_t code, const char *message);

// How many handles and strings this library gave out are still live (not freed): a program
// that freed everything it received sees 0 — a leak check that LeakSanitizer cannot make, since
// the handle table keeps every live handle reachable.
//
// Thread safety: any thread.
size_t rvm_live_handle_count(void);

// Fills `opts` with the defaults: no native library opened, 16 GiB input limit, no mmap.
//
// Ownership: writes `*opts`. Thread safety: any thread.
struct rvm_error *rvm_load_options_init(struct rvm_load_options *opts);

// Loads the file at `path`: a relaxvm executable (`.rvx`, every byte checked), a model
// compiled by Apache TVM (`.so` written by `export_library`: validated, then opened, which runs
// its code — naming it is the consent), or a standalone `.vmexec`. The native libraries a
// `.rvx` references open only as `opts->native_libraries` allows. `opts` may be NULL (defaults).
//
// Ownership: borrows `path` and `opts`; on success `*out` is a new executable the caller owns
// (`rvm_executable_free`). Thread safety: any thread.
struct rvm_error *rvm_executable_load_file(const char *path,
                                           const struct rvm_load_options *opts,
                                           struct rvm_executable **out);

// Loads an executable from `len` bytes at `data`: a `.rvx` (references to native libraries
// resolve against the current directory and open only as `opts` allows), a TVM `.so` (opened
// from these bytes: passing them is the consent to run its code; `name` stands for its path in
// messages and may be NULL) or a `.vmexec`. `opts` may be NULL (defaults).
//
// Ownership: the bytes are copied (they may be freed on return); on success `*out` is a new
// executable the caller owns. Thread safety: any thread.
struct rvm_error *rvm_executable_load_bytes(const uint8_t *data,
                                            size_t len,
                                            const char *name,
                                            const struct rvm_load_options *opts,
                                            struct rvm_executable **out);

// Frees `exe`. VMs made from it keep the program alive. NULL is allowed (nothing happens); a
// pointer that is not a live executable (a double free) is an error object.
//
// Ownership: takes `exe`. Thread safety: any thread, not concurrently with other uses of `exe`.
struct rvm_error *rvm_executable_free(struct rvm_executable *exe);

// The number of bytecode functions of `exe` (what `rvm_vm_call` can call by name).
//
// Ownership: borrows `exe`. Thread safety: any thread.
struct rvm_error *rvm_executable_function_count(const struct rvm_executable *exe, size_t *out);

// The name of bytecode function `index` of `exe`; `RVM_ERROR_INDEX` past the end.
//
// Ownership: `*out` belongs to `exe` and lives until `exe` is freed. Thread safety: any thread.
struct rvm_error *rvm_executable_function_name(const struct rvm_executable *exe,
                                               size_t index,
                                               const char **out);

// The program of `exe` in relaxvm's text form (what `relaxvm dis` prints).
//
// Ownership: borrows `exe`; on success `*out` is a string the caller frees with
// `rvm_string_free`. Thread safety: any thread.
struct rvm_error *rvm_executable_as_text(const struct rvm_executable *exe, char **out);

// Sets the inputs of function `name` for a later `rvm_vm_invoke_stateful(vm, name)`: the
// `nargs` values at `args`, one per parameter. As TVM's `set_input` does, numbers become 0-d
// tensors (an int or a bool an int32 tensor, a float a float32 one), also inside tuples,
// except where the function's signature declares a scalar; an int outside int32 is
// `RVM_ERROR_VALUE`. A wrong count is `RVM_ERROR_ARITY`, an unknown function
// `RVM_ERROR_UNKNOWN_FUNCTION` (listing the functions there are). Setting them again replaces
// them.
//
// Ownership: borrows everything passed (the VM keeps its own references to the values: they
// may be freed after this returns). Thread safety: as `rvm_vm_call`.
struct rvm_error *rvm_vm_set_input(const struct rvm_vm *vm,
                                   const char *name,
                                   const struct rvm_value *const *args,
                                   size_t nargs);

// Runs function `name` of `vm` on the inputs `rvm_vm_set_input` gave it, and keeps the result
// for `rvm_vm_get_outputs` (replacing the last one). No inputs set for `name` is
// `RVM_ERROR_VALUE`; the call's own error is this function's (its code kept, its message
// after `"rvm_vm_invoke_stateful: "`).
//
// Ownership: borrows `vm` and `name`. Thread safety: as `rvm_vm_call`.
struct rvm_error *rvm_vm_invoke_stateful(const struct rvm_vm *vm, const char *name);

// The result of the last `rvm_vm_invoke_stateful(vm, name)`, in `*out`; none yet is
// `RVM_ERROR_VALUE`.
//
// Ownership: borrows `vm` and `name`; on success `*out` is a new value the caller owns (the
// VM keeps the result too: each call returns a new handle to it). Thread safety: as
// `rvm_vm_call`.
struct rvm_error *rvm_vm_get_outputs(const struct rvm_vm *vm,
                                     const char *name,
                                     struct rvm_value **out);

// Frees a string this library returned. NULL is allowed (nothing happens); a pointer that is
// not a live string from this library (a double free) is an error object and frees nothing.
//
// Ownership: takes `s`. Thread safety: any thread, not concurrently with other uses of `s`.
struct rvm_error *rvm_string_free(char *s);

// A new null value. Never NULL.
//
// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
struct rvm_value *rvm_value_new_null(void);

// A new int value. Never NULL.
//
// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
struct rvm_value *rvm_value_new_int(int64_t x);

// A new float value. Never NULL.
//
// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
struct rvm_value *rvm_value_new_float(double x);

// A new bool value (`x != 0`). Never NULL.
//
// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
struct rvm_value *rvm_value_new_bool(bool x);

// A new string value from `len` bytes at `data`, which must be UTF-8 (they may contain NUL).
//
// Ownership: `data` is copied; on success `*out` is a new value the caller owns.
// Thread safety: any thread.
struct rvm_error *rvm_value_new_str(const char *data, size_t len, struct rvm_value **out);

// A new shape value of `ndim` dimensions at `dims` (each >= 0).
//
// Ownership: `dims` is copied; on success `*out` is a new value the caller owns.
// Thread safety: any thread.
struct rvm_error *rvm_value_new_shape(const int64_t *dims, size_t ndim, struct rvm_value **out);

// A new tuple of the `n` values at `items` (each a live value; NULL only when `n` is 0). Tuples
// may nest at most `RVM_MAX_TUPLE_NESTING` levels (`RVM_ERROR_VALUE` past it).
//
// Ownership: the items are borrowed (the tuple shares them: freeing an item afterwards does not
// change the tuple); on success `*out` is a new value the caller owns. Thread safety: any thread.
struct rvm_error *rvm_value_new_tuple(const struct rvm_value *const *items,
                                      size_t n,
                                      struct rvm_value **out);

// A new handle to the same value as `v` (a tensor's memory is shared, not copied).
//
// Ownership: borrows `v`; on success `*out` is a new value the caller owns.
// Thread safety: any thread.
struct rvm_error *rvm_value_clone(const struct rvm_value *v, struct rvm_value **out);

// Frees `v`. NULL is allowed (nothing happens); a pointer that is not a live value (a double
// free) is an error object and frees nothing. A tensor's memory lives on while other values,
// the VM or DLPack consumers use it.
//
// Ownership: takes `v`. Thread safety: any thread, not concurrently with other uses of `v`.
struct rvm_error *rvm_value_free(struct rvm_value *v);

// The kind of value `v` holds; `RVM_VALUE_INVALID` when `v` is not a live value handle.
//
// Ownership: borrows `v`. Thread safety: any thread.
enum rvm_value_kind rvm_value_get_kind(const struct rvm_value *v);

// The int in `v` (a bool reads as 0 or 1); `RVM_ERROR_TYPE` for another kind.
//
// Ownership: borrows `v`. Thread safety: any thread.
struct rvm_error *rvm_value_get_int(const struct rvm_value *v, int64_t *out);

// The float in `v` (an int converts); `RVM_ERROR_TYPE` for another kind.
//
// Ownership: borrows `v`. Thread safety: any thread.
struct rvm_error *rvm_value_get_float(const struct rvm_value *v, double *out);

// The bool in `v`; `RVM_ERROR_TYPE` for another kind.
//
// Ownership: borrows `v`. Thread safety: any thread.
struct rvm_error *rvm_value_get_bool(const struct rvm_value *v, bool *out);

// The string in `v`: `*data` points to its UTF-8 bytes followed by a NUL, `*len` (if not NULL)
// is its length in bytes without the NUL (the string may contain NULs).
//
// Ownership: `*data` belongs to `v` and lives until `v` is freed. Thread safety: any thread.
struct rvm_error *rvm_value_get_str(const struct rvm_value *v, const char **data, size_t *len);

// The dimensions of a shape value `v` (or of a tensor value's shape): `*dims` points to
// `*ndim` int64s (`*dims` may be NULL when `*ndim` is 0).
//
// Ownership: `*dims` belongs to `v` and lives until `v` is freed. Thread safety: any thread.
struct rvm_error *rvm_value_get_shape(const struct rvm_value *v,
                                      const int64_t **dims,
                                      size_t *ndim);

// The number of items of a tuple value `v`.
//
// Ownership: borrows `v`. Thread safety: any thread.
struct rvm_error *rvm_value_tuple_size(const struct rvm_value *v, size_t *out);

// Item `index` of a tuple value `v`, as a new value; `RVM_ERROR_INDEX` past the end.
//
// Ownership: borrows `v`; on success `*out` is a new value the caller owns.
// Thread safety: any thread.
struct rvm_error *rvm_value_tuple_get(const struct rvm_value *v,
                                      size_t index,
                                      struct rvm_value **out);

// `v` as text, as relaxvm prints values (a tensor's elements, abbreviated when large).
//
// Ownership: borrows `v`; on success `*out` is a NUL-terminated string the caller frees with
// `rvm_string_free`. Thread safety: any thread.
struct rvm_error *rvm_value_to_string(const struct rvm_value *v, char **out);

// A VM running `exe` on CPU 0, with `opts` (NULL: the defaults; else filled by
// `rvm_vm_options_init_sized`, whose `struct_size` is checked first). Registers relaxvm's builtins first;
// every packed function the program calls must be found now (in the executable's libraries or
// the registry: register C functions before), or this fails naming them.
//
// Ownership: borrows `exe` (the VM keeps the program alive: `exe` may be freed first) and
// `opts`; on success `*out` is a new VM the caller owns (`rvm_vm_free`). Thread safety: any
// thread.
struct rvm_error *rvm_vm_create(const struct rvm_executable *exe,
                                const struct rvm_vm_options *opts,
                                struct rvm_vm **out);

// Frees `vm`. NULL is allowed (nothing happens); a pointer that is not a live VM (a double
// free) is an error object. Values it returned stay valid.
//
// Ownership: takes `vm`. Thread safety: not while a call runs on it (wait for the call to
// return, after `rvm_vm_interrupt` if need be).
struct rvm_error *rvm_vm_free(struct rvm_vm *vm);

// Function `name` of `vm`'s executable, as a function value to pass to `rvm_vm_invoke` (or as
// an argument); `RVM_ERROR_UNKNOWN_FUNCTION` naming the functions there are otherwise.
//
// Ownership: borrows `vm` and `name`; on success `*out` is a new value the caller owns.
// Thread safety: as `rvm_vm_call`.
struct rvm_error *rvm_vm_get_function(const struct rvm_vm *vm,
                                      const char *name,
                                      struct rvm_value **out);

// Calls function `name` of `vm` with the `nargs` values at `args`; the result in `*out`.
//
// Ownership: borrows everything passed (tensors are shared with the call, not copied); on
// success `*out` is a new value the caller owns. Thread safety: one call per VM at a time: a
// call on a VM that is running one (from another thread, or from a packed function it runs)
// fails with `RVM_ERROR_BUSY` at once. VMs on different threads run in parallel.
struct rvm_error *rvm_vm_call(const struct rvm_vm *vm,
                              const char *name,
                              const struct rvm_value *const *args,
                              size_t nargs,
                              struct rvm_value **out);

// Calls function value `func` (from `rvm_vm_get_function`, or a closure a call returned) on
// `vm` with the `nargs` values at `args`.
//
// Ownership and thread safety: as `rvm_vm_call`.
struct rvm_error *rvm_vm_invoke(const struct rvm_vm *vm,
                                const struct rvm_value *func,
                                const struct rvm_value *const *args,
                                size_t nargs,
                                struct rvm_value **out);

// Stops the call running on `vm` at its next check (every 1024 bytecode calls and backward
// jumps, and in long builtins): it fails with `RVM_ERROR_INTERRUPTED`. Has no effect on a call
// that starts after it (each call starts uninterrupted).
//
// Ownership: borrows `vm`. Thread safety: any thread, also while a call runs on `vm` (that is
// its purpose); not concurrently with `rvm_vm_free(vm)`.
struct rvm_error *rvm_vm_interrupt(const struct rvm_vm *vm);

// Runs function `name` once with `args`, timing every call it makes (builtins, kernels, C
// functions, bytecode functions, the VM's own overhead), and writes the report in `format`
// (`RVM_PROFILE_TABLE`, `_CSV`, `_JSON` or `_CHROME_TRACE`; the last three need the library's
// `tooling` feature, on by default, else `RVM_ERROR_UNSUPPORTED`). The VM must have been made
// with `profile` set. The run's result is not kept (call `rvm_vm_call` for it); its error, if it
// fails, is this function's.
//
// Ownership: borrows the inputs; on success `*report` is a string the caller frees with
// `rvm_string_free`. Thread safety: as `rvm_vm_call`.
struct rvm_error *rvm_vm_profile(const struct rvm_vm *vm,
                                 const char *name,
                                 const struct rvm_value *const *args,
                                 size_t nargs,
                                 uint32_t format,
                                 char **report);

// The allocator `vm`'s builtins use, as its options' `memory_cfg` chose it: `*kind` becomes
// `RVM_POOLED_ALLOCATOR` (TVM's default) or `RVM_NAIVE_ALLOCATOR`.
//
// Ownership: borrows `vm`; writes `*kind`. Thread safety: as `rvm_vm_call` (a VM running a
// call answers `RVM_ERROR_BUSY`).
struct rvm_error *rvm_vm_get_allocator(const struct rvm_vm *vm, int64_t *kind);

// Fills `opts` with the defaults (those of `relaxvm::Limits`; no step budget, no profiling,
// the thread pool as configured, TVM's default `memory_cfg`: the pooled allocator).
// `struct_size` must be `sizeof(rvm_vm_options)` of the caller's header (pass `sizeof opts`): a
// size this library does not know is `RVM_ERROR_INVALID_ARGUMENT` and nothing is written (a
// program compiled against another relaxvm.h would otherwise get a struct of another layout).
//
// Ownership: writes `*opts`. Thread safety: any thread.
struct rvm_error *rvm_vm_options_init_sized(struct rvm_vm_options *opts, size_t struct_size);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* RELAXVM_H */
