/* Hand-written kernels following the tvm-ffi safe-call ABI and TVM's runtime-service slots, so
 * that relaxvm-tvm's FFI is tested without TVM. Compiled by tests/ffi.rs with the system C
 * compiler. Layouts follow tvm/ffi/c_api.h, dlpack.h and tvm/runtime/c_backend_api.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct { int32_t type_index; uint32_t small_str_len; union { int64_t v_int64; double v_float64; void* v_ptr; uint64_t v_uint64; }; } TVMFFIAny;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct { void* data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t* shape; int64_t* strides; uint64_t byte_offset; } DLTensor;
typedef struct { void* sync_handle; int32_t num_task; } TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/* The one import every TVM library has. */
void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** parts, int32_t num_parts);

/* Runtime-service slots, filled by the loader. */
void* (*__TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = 0;
int (*__TVMBackendFreeWorkspace)(int, int, void*) = 0;
int (*__TVMBackendParallelLaunch)(FTVMParallelLambda, void*, int) = 0;
int (*__TVMBackendParallelBarrier)(int, TVMParallelGroupEnv*) = 0;
void (*__TVMFFIErrorSetRaisedFromCStr)(const char*, const char*) = 0;
int (*__TVMFFIFunctionCall)(void*, TVMFFIAny*, int32_t, TVMFFIAny*) = 0;
int (*__TVMFFIEnvModLookupFromImports)(void*, const char*, void**) = 0;
int (*__TVMFFIHandleInitOnce)(void**, int (*)(void**)) = 0;
void* __tvm_ffi__library_ctx = 0;

static int fail(const char* kind, const char* a, const char* b) {
  const char* parts[2] = {a, b};
  TVMFFIErrorSetRaisedFromCStrParts(kind, parts, 2);
  return -1;
}

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* add(a, b, out): float32 elementwise; checks types as TVM's generated code does. */
int __tvm_ffi_add(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  if (n != 3) return fail("TypeError", "add: expected 3 arguments", "");
  for (int i = 0; i < 3; ++i)
    if (args[i].type_index != 7) return fail("TypeError", "add: expected DLTensor arguments", "");
  DLTensor *a = args[0].v_ptr, *b = args[1].v_ptr, *o = args[2].v_ptr;
  if (a->dtype.code != 2 || a->dtype.bits != 32) return fail("ValueError", "add: ", "expected float32");
  if (((uintptr_t)a->data) % 64 || ((uintptr_t)o->data) % 64) return fail("ValueError", "add: ", "misaligned data");
  if (a->strides || o->strides || a->byte_offset) return fail("ValueError", "add: ", "expected compact tensors");
  const float *x = a->data, *y = b->data;
  float* z = o->data;
  for (int64_t i = 0; i < numel(a); ++i) z[i] = x[i] + y[i];
  result->type_index = 0;
  return 0;
}

/* echo(x): returns its scalar argument, and its type index + 100 for DataType/Device. */
int __tvm_ffi_echo(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  if (n != 1) return fail("TypeError", "echo: expected 1 argument", "");
  switch (args[0].type_index) {
    case 0: case 1: case 2: case 3: *result = args[0]; return 0;
    case 5: case 6: result->type_index = 1; result->v_int64 = (int64_t)args[0].type_index * 1000 + (int64_t)(args[0].v_uint64 & 0xffff); return 0;
    default: return fail("TypeError", "echo: unexpected type", "");
  }
}

/* ndinfo(t): ndim * 100 + dtype code * 10 + (strides != NULL). */
int __tvm_ffi_ndinfo(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  DLTensor* t = args[0].v_ptr;
  result->type_index = 1;
  result->v_int64 = t->ndim * 100 + t->dtype.code * 10 + (t->strides != 0);
  return 0;
}

/* fail_kernel(): raises a ValueError in two parts. */
int __tvm_ffi_fail_kernel(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  return fail("ValueError", "Check failed: ", "the kernel refuses");
}

/* fail_cstr(): raises through the __TVMFFIErrorSetRaisedFromCStr slot. */
int __tvm_ffi_fail_cstr(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  __TVMFFIErrorSetRaisedFromCStr("IndexError", "index out of bounds");
  return -1;
}

/* workspace(nbytes): allocates, checks alignment, fills, frees; returns the sum of bytes. */
int __tvm_ffi_workspace(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  uint64_t nbytes = (uint64_t)args[0].v_int64;
  unsigned char* p = __TVMBackendAllocWorkspace(1, 0, nbytes, 2, 32);
  if (!p) return -1;
  if ((uintptr_t)p % 64) return fail("ValueError", "workspace ", "misaligned");
  memset(p, 1, nbytes);
  int64_t sum = 0;
  for (uint64_t i = 0; i < nbytes; ++i) sum += p[i];
  if (__TVMBackendFreeWorkspace(1, 0, p) != 0) return fail("RuntimeError", "free ", "failed");
  result->type_index = 1;
  result->v_int64 = sum;
  return 0;
}

/* parallel(out, num_task): each task writes its id and the group size to out[task]; a barrier
 * then checks that every task wrote before any continues. */
typedef struct { int64_t* out; int64_t len; int bad; } Shared;
static int task(int id, TVMParallelGroupEnv* env, void* cdata) {
  Shared* s = cdata;
  if (id >= s->len) return -1;
  s->out[id] = id + 1000 * env->num_task;
  if (__TVMBackendParallelBarrier(id, env) != 0) return -1;
  for (int i = 0; i < env->num_task; ++i)
    if (s->out[i] != i + 1000 * env->num_task) s->bad = 1;
  return 0;
}
static int nested(int id, TVMParallelGroupEnv* env, void* cdata) {
  Shared* s = cdata;
  /* A launch inside a task runs inline, as one task covering everything. */
  Shared inner = {s->out + id, 1, 0};
  if (__TVMBackendParallelLaunch(task, &inner, 0) != 0) return -1;
  return inner.bad ? -1 : 0;
}
int __tvm_ffi_parallel(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  DLTensor* t = args[0].v_ptr;
  Shared s = {t->data, t->shape[0], 0};
  int nest = n > 2 && args[2].v_int64;
  if (__TVMBackendParallelLaunch(nest ? nested : task, &s, (int)args[1].v_int64) != 0)
    return fail("RuntimeError", "parallel ", "launch failed");
  result->type_index = 1;
  result->v_int64 = s.bad;
  return 0;
}

/* parallel_fail(num_task): the last task of the group raises a ValueError on the thread that
 * runs it (a pool worker when there are several) and fails; the kernel returns the launch's
 * code without an error of its own, as TVM's generated code does. */
static int failing_task(int id, TVMParallelGroupEnv* env, void* cdata) {
  if (id != env->num_task - 1) return 0;
  static __thread char msg[64];
  snprintf(msg, sizeof msg, "task %d of %d", id, env->num_task);
  return fail("ValueError", "failed in ", msg);
}
int __tvm_ffi_parallel_fail(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  return __TVMBackendParallelLaunch(failing_task, 0, (int)args[0].v_int64);
}

/* callback(x, out, name): calls packed function `name` (a small or raw string) with (x, out). */
static void* cached = 0;
static const char* wanted = 0;
static int init(void** out) { return __TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, wanted, out); }
int __tvm_ffi_callback(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  wanted = "test.ffi.negate";
  void* h = 0;
  if (n > 2) {
    /* A named lookup every call (no caching) for the missing-function test. */
    if (__TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, (const char*)args[2].v_ptr, &h) != 0) return -1;
  } else {
    if (__TVMFFIHandleInitOnce(&cached, init) != 0) return -1;
    h = cached;
  }
  TVMFFIAny call_args[3] = {args[0], args[1], {0}};
  call_args[2].type_index = 11; /* a small string: "hi" */
  call_args[2].small_str_len = 2;
  call_args[2].v_uint64 = 'h' | ('i' << 8);
  TVMFFIAny ret = {0};
  if (__TVMFFIFunctionCall(h, call_args, 3, &ret) != 0) return -1;
  *result = ret;
  return 0;
}

/* kinds(which): calls "test.ffi.kinds" (which = 0) or "test.ffi.fails" (1) with one value of
 * each kind a kernel passes: a raw string, a dtype, a device, a bool, a float, an int, None,
 * a strided DLTensor with a byte offset and a 0-d DLTensor. */
int __tvm_ffi_kinds(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  void* h = 0;
  const char* name = args[0].v_int64 ? "test.ffi.fails" : "test.ffi.kinds";
  if (__TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, name, &h) != 0) return -1;
  /* A strided view with a byte offset: elements 1 and 3 of {1, 2, 3, 4}, i.e. {2, 4}. */
  static float data[4] = {1, 2, 3, 4};
  static int64_t shape[1] = {2}, strides[1] = {2};
  DLTensor view = {data, {1, 0}, 1, {2, 32, 1}, shape, strides, sizeof(float)};
  /* A 0-d int64 tensor. */
  static int64_t scalar = 42;
  DLTensor zero_d = {&scalar, {1, 0}, 0, {0, 64, 1}, 0, 0, 0};
  TVMFFIAny a[9];
  memset(a, 0, sizeof a);
  a[7].type_index = 7; a[7].v_ptr = &view;
  a[8].type_index = 7; a[8].v_ptr = &zero_d;
  a[0].type_index = 8; a[0].v_ptr = (void*)"raw text";
  a[1].type_index = 5; a[1].v_uint64 = 2 | (32 << 8) | (1 << 16);  /* float32 */
  a[2].type_index = 6; a[2].v_uint64 = 1;                          /* cpu(0) */
  a[3].type_index = 2; a[3].v_int64 = 1;
  a[4].type_index = 3; a[4].v_float64 = 0.5;
  a[5].type_index = 1; a[5].v_int64 = -7;
  a[6].type_index = 0;
  return __TVMFFIFunctionCall(h, a, 9, result);
}

/* exp(x): expf from libm, which TVM's libraries call without naming libm (no DT_NEEDED). */
int __tvm_ffi_exp(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  if (n != 1 || args[0].type_index != 3) return fail("TypeError", "exp: ", "expected a float");
  result->type_index = 3;
  result->v_float64 = expf((float)args[0].v_float64);
  return 0;
}

/* counter(): how many times this copy of the library ran it (state in a library global). */
static int64_t calls = 0;
int __tvm_ffi_counter(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  result->type_index = 1;
  result->v_int64 = ++calls;
  return 0;
}

/* A tiny data blob the ELF reader finds by name. */
const unsigned char __tvm_ffi__library_bin[16] = {8, 0, 0, 0, 0, 0, 0, 0, 'r', 'e', 'l', 'a', 'x', 'v', 'm', '!'};
