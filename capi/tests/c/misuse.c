/* The C API's error paths from C, run under AddressSanitizer and LeakSanitizer by
 * scripts/test.sh: misuse (NULL, wrong and freed handles, double frees, invalid UTF-8, huge
 * counts) is an error object, never a crash; a call is interrupted from another thread; a C
 * function's error comes back with its code. Exits non-zero on the first surprise.
 *
 * TVM's stateful calls and memory_cfg options (the struct's size check among them) are checked
 * here too.
 *
 *   misuse LOOP.rvx        (assembled from capi/tests/c/loop.txt) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relaxvm.h"

static int failures = 0;

/* Checks that `err` is an error of `code` whose message contains `needle`, and frees it. */
static void expect(int line, rvm_error *err, rvm_error_code code, const char *needle) {
  if (!err) {
    if (code != RVM_OK) {
      fprintf(stderr, "line %d: expected %s, got success\n", line, rvm_error_code_name(code));
      failures++;
    }
    return;
  }
  const char *msg = rvm_error_message(err);
  if (rvm_error_get_code(err) != code || !strstr(msg, needle)) {
    fprintf(stderr, "line %d: expected %s containing \"%s\", got %s: %s\n", line,
            rvm_error_code_name(code), needle, rvm_error_code_name(rvm_error_get_code(err)), msg);
    failures++;
  }
  rvm_error_free(err);
}
#define EXPECT(call, code, needle) expect(__LINE__, (call), (code), (needle))
#define OK(call) expect(__LINE__, (call), RVM_OK, "")

static atomic_int spinning = 0;

static rvm_error *mark_spinning(void *user_data, const rvm_value *const *args, size_t nargs,
                                rvm_value **result) {
  (void)user_data, (void)args, (void)nargs, (void)result;
  atomic_store(&spinning, 1);
  return NULL;
}

static rvm_error *refuse(void *user_data, const rvm_value *const *args, size_t nargs,
                         rvm_value **result) {
  (void)user_data, (void)result;
  int64_t x = 0;
  rvm_error *err = nargs == 1 ? rvm_value_get_int(args[0], &x) : NULL;
  if (err) return err;
  return rvm_error_new(RVM_ERROR_ARITHMETIC, "refused by C");
}

static void free_counter(void *user_data) { free(user_data); }

struct call_result {
  rvm_vm *vm;
  rvm_error *err;
  atomic_int done;
};

static void *run_spin(void *arg) {
  struct call_result *r = arg;
  rvm_value *out = NULL;
  r->err = rvm_vm_call(r->vm, "spin", NULL, 0, &out);
  atomic_store(&r->done, 1);
  return NULL;
}

/* rvm_vm_options as relaxvm.h declared it before it had `struct_size`: what a program compiled
 * against that header passes. */
struct options_before_struct_size {
  uint64_t max_call_depth, max_reentry, step_budget, max_stack_registers;
  bool profile;
  uint32_t num_threads;
};

/* The allocator a VM made with `opts` uses, or -1 when making it fails with `code`/`needle`. */
static int64_t allocator_with(int line, const rvm_executable *exe, const rvm_vm_options *opts,
                              rvm_error_code code, const char *needle) {
  rvm_vm *vm = NULL;
  int64_t kind = -1;
  rvm_error *err = rvm_vm_create(exe, opts, &vm);
  expect(line, err, code, needle);
  if (!err) {
    expect(line, rvm_vm_get_allocator(vm, &kind), RVM_OK, "");
    expect(line, rvm_vm_free(vm), RVM_OK, "");
  }
  return kind;
}

/* TVM's memory_cfg through rvm_vm_options, and the options' size check. */
static void memory_cfg(const rvm_executable *exe) {
  rvm_vm_options opts;
  OK(rvm_vm_options_init_sized(&opts, sizeof opts));
  if (allocator_with(__LINE__, exe, &opts, RVM_OK, "") != RVM_POOLED_ALLOCATOR) failures++;
  opts.memory_cfg = "naive";
  if (allocator_with(__LINE__, exe, &opts, RVM_OK, "") != RVM_NAIVE_ALLOCATOR) failures++;
  opts.memory_cfg = "arena";
  allocator_with(__LINE__, exe, &opts, RVM_ERROR_VALUE, "memory_cfg must be \"naive\" or \"pooled\", found \"arena\"");
  rvm_memory_cfg_entry entries[2] = {{RVM_DLPACK_CPU, 0, RVM_NAIVE_ALLOCATOR}, {RVM_DLPACK_CPU, 3, RVM_POOLED_ALLOCATOR}};
  opts.memory_cfg = "naive";
  opts.memory_cfg_devices = entries;
  opts.num_memory_cfg_devices = 2;
  allocator_with(__LINE__, exe, &opts, RVM_ERROR_INVALID_ARGUMENT, "both set");
  opts.memory_cfg = NULL;
  if (allocator_with(__LINE__, exe, &opts, RVM_OK, "") != RVM_NAIVE_ALLOCATOR) failures++;
  entries[1].device_id = 0; /* cpu:0 twice, naive then pooled */
  allocator_with(__LINE__, exe, &opts, RVM_ERROR_VALUE, "names cpu:0 twice");
  entries[1].allocator = 9;
  allocator_with(__LINE__, exe, &opts, RVM_ERROR_VALUE, "found 9");
  opts.memory_cfg_devices = NULL;
  allocator_with(__LINE__, exe, &opts, RVM_ERROR_INVALID_ARGUMENT, "found NULL");

  /* Another header's layout, and an init with another size, are refused. */
  struct options_before_struct_size old = {100000, 200, 0, 1 << 24, false, 0};
  allocator_with(__LINE__, exe, (const rvm_vm_options *)(const void *)&old, RVM_ERROR_INVALID_ARGUMENT,
                 "opts->magic is 0x186a0");
  old.max_call_depth = sizeof(rvm_vm_options); /* attack finding layers/11: still refused */
  allocator_with(__LINE__, exe, (const rvm_vm_options *)(const void *)&old, RVM_ERROR_INVALID_ARGUMENT,
                 "expected RVM_VM_OPTIONS_MAGIC");
  EXPECT(rvm_vm_options_init_sized(&opts, sizeof old), RVM_ERROR_INVALID_ARGUMENT, "compiled against another relaxvm.h");
  EXPECT(rvm_vm_get_allocator(NULL, NULL), RVM_ERROR_INVALID_ARGUMENT, "NULL");
}

/* TVM's stateful calls: set_input, invoke_stateful, get_outputs. */
static void stateful(rvm_vm *vm) {
  rvm_value *n = rvm_value_new_int(5), *x = rvm_value_new_int(7), *out = NULL, *item = NULL;
  const rvm_value *args[2] = {n, x};
  EXPECT(rvm_vm_invoke_stateful(vm, "pair"), RVM_ERROR_VALUE, "no inputs were set for \"pair\"");
  EXPECT(rvm_vm_get_outputs(vm, "pair", &out), RVM_ERROR_VALUE, "no outputs for \"pair\"");
  EXPECT(rvm_vm_set_input(vm, "pair", args, 1), RVM_ERROR_ARITY, "pair");
  EXPECT(rvm_vm_set_input(vm, "nope", args, 2), RVM_ERROR_UNKNOWN_FUNCTION, "its functions are");
  EXPECT(rvm_vm_set_input(vm, NULL, args, 2), RVM_ERROR_INVALID_ARGUMENT, "NULL");
  EXPECT(rvm_vm_set_input((rvm_vm *)n, "pair", args, 2), RVM_ERROR_INVALID_ARGUMENT, "found an rvm_value handle");
  OK(rvm_vm_set_input(vm, "pair", args, 2));
  OK(rvm_value_free(n));
  OK(rvm_value_free(x));
  OK(rvm_vm_invoke_stateful(vm, "pair"));
  EXPECT(rvm_vm_get_outputs(vm, "pair", NULL), RVM_ERROR_INVALID_ARGUMENT, "NULL");
  OK(rvm_vm_get_outputs(vm, "pair", &out));
  /* The declared i64 stays an int; the `any` parameter's int became a 0-d int32 tensor. */
  OK(rvm_value_tuple_get(out, 0, &item));
  if (rvm_value_get_kind(item) != RVM_VALUE_INT) failures++;
  OK(rvm_value_free(item));
  OK(rvm_value_tuple_get(out, 1, &item));
  DLManagedTensorVersioned *view = NULL;
  OK(rvm_value_to_dlpack(item, &view));
  if (view->dl_tensor.ndim != 0 || view->dl_tensor.dtype.bits != 32 || *(int32_t *)view->dl_tensor.data != 7) {
    fprintf(stderr, "line %d: expected a 0-d int32 tensor holding 7\n", __LINE__);
    failures++;
  }
  view->deleter(view);
  OK(rvm_value_free(item));
  OK(rvm_value_free(out));
}

static atomic_int twice_freed = 0;

static rvm_error *twice(void *user_data, const rvm_value *const *args, size_t nargs, rvm_value **result) {
  (void)user_data;
  int64_t x = 0;
  rvm_error *err = nargs == 1 ? rvm_value_get_int(args[0], &x) : rvm_error_new(RVM_ERROR_ARITY, "one argument");
  if (err) return err;
  *result = rvm_value_new_int(2 * x);
  return NULL;
}

static void count_twice_freed(void *user_data) {
  (void)user_data;
  atomic_fetch_add(&twice_freed, 1);
}

/* A C function for R.call_py_func, registered by name; the table's clear frees its data. */
static void call_py_func(rvm_vm *vm) {
  rvm_value *x = rvm_value_new_int(21), *out = NULL;
  const rvm_value *args[1] = {x};
  EXPECT(rvm_register_py_func(NULL, twice, NULL, NULL), RVM_ERROR_INVALID_ARGUMENT, "NULL");
  EXPECT(rvm_register_py_func("c.twice", NULL, NULL, NULL), RVM_ERROR_INVALID_ARGUMENT, "f is NULL");
  EXPECT(rvm_vm_call(vm, "py", args, 1, &out), RVM_ERROR_VALUE, "\"c.twice\" not found in the call_py_func registry");
  OK(rvm_register_py_func("c.twice", twice, NULL, count_twice_freed));
  OK(rvm_vm_call(vm, "py", args, 1, &out));
  int64_t got = 0;
  OK(rvm_value_get_int(out, &got));
  if (got != 42) {
    fprintf(stderr, "line %d: c.twice(21) returned %lld\n", __LINE__, (long long)got);
    failures++;
  }
  OK(rvm_value_free(out));
  OK(rvm_vm_call(vm, "clear_py", NULL, 0, &out));
  OK(rvm_value_free(out));
  if (atomic_load(&twice_freed) != 1) {
    fprintf(stderr, "line %d: clearing the table did not free the function's data\n", __LINE__);
    failures++;
  }
  EXPECT(rvm_vm_call(vm, "py", args, 1, &out), RVM_ERROR_VALUE, "not found");
  OK(rvm_value_free(x));
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LOOP.rvx\n", argv[0]);
    return 2;
  }
  int *counter = malloc(sizeof(int)); /* freed by the registry when replaced */
  OK(rvm_register_func("test.spinning", mark_spinning, NULL, NULL, true));
  OK(rvm_register_func("test.refuse", refuse, counter, free_counter, true));
  OK(rvm_register_func("test.refuse", refuse, NULL, NULL, true)); /* frees counter */
  EXPECT(rvm_register_func("test.refuse", refuse, NULL, NULL, false), RVM_ERROR_ALREADY_REGISTERED,
         "test.refuse");
  EXPECT(rvm_register_func(NULL, refuse, NULL, NULL, true), RVM_ERROR_INVALID_ARGUMENT, "NULL");

  rvm_executable *exe = NULL;
  EXPECT(rvm_executable_load_file("/nonexistent.rvx", NULL, &exe), RVM_ERROR_IO, "/nonexistent.rvx");
  EXPECT(rvm_executable_load_file("\xff.rvx", NULL, &exe), RVM_ERROR_INVALID_ARGUMENT, "UTF-8");
  const char junk[] = "definitely not a program";
  EXPECT(rvm_executable_load_bytes((const uint8_t *)junk, sizeof junk, "junk", NULL, &exe),
         RVM_ERROR_FORMAT, "junk");
  OK(rvm_executable_load_file(argv[1], NULL, &exe));
  rvm_vm *vm = NULL;
  memory_cfg(exe);
  OK(rvm_vm_create(exe, NULL, &vm));
  OK(rvm_executable_free(exe));
  stateful(vm);
  call_py_func(vm);
  EXPECT(rvm_executable_free(exe), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_executable");

  /* Wrong handles, NULLs, huge counts. */
  rvm_value *one = rvm_value_new_int(1), *out = NULL;
  const rvm_value *args[1] = {one};
  EXPECT(rvm_vm_call((rvm_vm *)one, "spin", NULL, 0, &out), RVM_ERROR_INVALID_ARGUMENT,
         "expected an rvm_vm handle, found an rvm_value handle");
  EXPECT(rvm_vm_call(vm, "spin", args, (size_t)-1, &out), RVM_ERROR_INVALID_ARGUMENT, "allowed");
  EXPECT(rvm_vm_call(vm, "nope", NULL, 0, &out), RVM_ERROR_UNKNOWN_FUNCTION, "its functions are");
  EXPECT(rvm_vm_call(vm, "refuse", args, 1, NULL), RVM_ERROR_INVALID_ARGUMENT, "NULL");
  EXPECT(rvm_vm_call(vm, "refuse", args, 1, &out), RVM_ERROR_ARITHMETIC, "refused by C");
  double d;
  EXPECT(rvm_value_get_float(NULL, &d), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
  char *s = NULL;
  OK(rvm_value_to_string(one, &s));
  OK(rvm_string_free(s));
  EXPECT(rvm_string_free(s), RVM_ERROR_INVALID_ARGUMENT, "not a live string");
  OK(rvm_value_free(one));
  EXPECT(rvm_value_free(one), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_value");
  int64_t i;
  EXPECT(rvm_value_get_int(one, &i), RVM_ERROR_INVALID_ARGUMENT, "freed already");
  rvm_error_free(NULL);

  /* Interrupt a running endless loop from this thread. */
  struct call_result r = {vm, NULL, 0};
  pthread_t t;
  pthread_create(&t, NULL, run_spin, &r);
  while (!atomic_load(&spinning)) sched_yield();
  /* A second call while it runs is refused at once. */
  EXPECT(rvm_vm_call(vm, "spin", NULL, 0, &out), RVM_ERROR_BUSY, "running a call");
  while (!atomic_load(&r.done)) {
    OK(rvm_vm_interrupt(vm));
    sched_yield();
  }
  pthread_join(t, NULL);
  EXPECT(r.err, RVM_ERROR_INTERRUPTED, "interrupted");
  OK(rvm_vm_free(vm));
  EXPECT(rvm_vm_free(vm), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_vm");

  if (rvm_live_handle_count() != 0) {
    fprintf(stderr, "%zu handles were not freed\n", rvm_live_handle_count());
    failures++;
  }
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("misuse: every error path returned its error object\n");
  return 0;
}
