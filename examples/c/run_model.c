/* Loads a relaxvm executable (add.rvx, assembled from add.txt) and a model compiled by Apache
 * TVM (a .so), runs both with tensors passed as DLPack, and prints the results.
 *
 *   run_model ADD.rvx [MODEL.so]
 *
 * add.rvx computes c.scale(a + b, 3), where c.scale is the C function below, registered as a
 * packed function. The model takes a (1, 784) float32 tensor (tests/tvm_corpus: hand/mlp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relaxvm.h"

/* Ends the program with the error's code and message when `call` fails. */
#define CHECK(call)                                                                          \
  do {                                                                                       \
    rvm_error *err_ = (call);                                                                \
    if (err_) {                                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__,                                 \
              rvm_error_code_name(rvm_error_get_code(err_)), rvm_error_message(err_));       \
      rvm_error_free(err_);                                                                  \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* A float32 matrix owned by C, lent to relaxvm as a DLPack managed tensor. */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[2];
  float *data;
} Matrix;

static void matrix_delete(DLManagedTensorVersioned *m) {
  Matrix *t = (Matrix *)m->manager_ctx;
  free(t->data);
  free(t);
}

static DLManagedTensorVersioned *matrix_new(int64_t rows, int64_t cols) {
  Matrix *t = calloc(1, sizeof(Matrix));
  t->data = calloc((size_t)(rows * cols), sizeof(float));
  t->shape[0] = rows;
  t->shape[1] = cols;
  t->managed.version.major = RVM_DLPACK_MAJOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = matrix_delete;
  t->managed.dl_tensor.data = t->data;
  t->managed.dl_tensor.device.device_type = RVM_DLPACK_CPU;
  t->managed.dl_tensor.ndim = 2;
  t->managed.dl_tensor.dtype.code = 2; /* kDLFloat */
  t->managed.dl_tensor.dtype.bits = 32;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.dl_tensor.strides = NULL; /* compact, row-major */
  return &t->managed;
}

static size_t numel(const DLTensor *t) {
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  return n;
}

static int is_float32_compact(const DLTensor *t) {
  if (t->dtype.code != 2 || t->dtype.bits != 32 || t->dtype.lanes != 1) return 0;
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->strides && t->shape[i] != 1 && t->strides[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

static int calls_of_scale = 0;

/* c.scale(x, k): the float32 tensor x times the int k, as a new tensor. */
static rvm_error *c_scale(void *user_data, const rvm_value *const *args, size_t nargs,
                          rvm_value **result) {
  int *calls = user_data;
  *calls += 1;
  if (nargs != 2) return rvm_error_new(RVM_ERROR_ARITY, "expected 2 arguments (x, k)");
  int64_t k;
  rvm_error *err = rvm_value_get_int(args[1], &k);
  if (err) return err;
  DLManagedTensorVersioned *x;
  if ((err = rvm_value_to_dlpack(args[0], &x))) return err;
  const DLTensor *in = &x->dl_tensor;
  if (in->ndim != 2 || !is_float32_compact(in)) {
    x->deleter(x);
    return rvm_error_new(RVM_ERROR_TYPE, "expected a compact float32 matrix");
  }
  DLManagedTensorVersioned *y = matrix_new(in->shape[0], in->shape[1]);
  const float *src = (const float *)((const char *)in->data + in->byte_offset);
  float *dst = y->dl_tensor.data;
  for (size_t i = 0; i < numel(in); i++) dst[i] = src[i] * (float)k;
  x->deleter(x); /* done with the view of relaxvm's tensor */
  err = rvm_value_from_dlpack(y, result);
  if (err) y->deleter(y); /* on error relaxvm did not take it */
  return err;
}

/* Prints a tensor value's shape and elements through a DLPack view (no copy). */
static void print_tensor(const char *label, const rvm_value *v) {
  DLManagedTensorVersioned *view;
  CHECK(rvm_value_to_dlpack(v, &view));
  const DLTensor *t = &view->dl_tensor;
  printf("%s: shape (", label);
  for (int i = 0; i < t->ndim; i++) printf(i ? ", %lld" : "%lld", (long long)t->shape[i]);
  printf(")%s\n ", view->flags & RVM_DLPACK_FLAG_READ_ONLY ? " read-only" : "");
  const float *data = (const float *)((const char *)t->data + t->byte_offset);
  for (size_t i = 0; i < numel(t) && i < 10; i++) printf(" %.4f", data[i]);
  printf("\n");
  view->deleter(view);
}

static void run_add(const char *path) {
  CHECK(rvm_register_func("c.scale", c_scale, &calls_of_scale, NULL, true));
  rvm_executable *exe = NULL;
  CHECK(rvm_executable_load_file(path, NULL, &exe));
  rvm_vm *vm = NULL;
  CHECK(rvm_vm_create(exe, NULL, &vm));
  CHECK(rvm_executable_free(exe)); /* the VM keeps the program alive */

  DLManagedTensorVersioned *a = matrix_new(2, 3), *b = matrix_new(2, 3);
  for (int i = 0; i < 6; i++) {
    ((float *)a->dl_tensor.data)[i] = (float)i;
    ((float *)b->dl_tensor.data)[i] = 1.0f;
  }
  rvm_value *args[2];
  CHECK(rvm_value_from_dlpack(a, &args[0])); /* relaxvm owns a and b from here on */
  CHECK(rvm_value_from_dlpack(b, &args[1]));
  rvm_value *result = NULL;
  CHECK(rvm_vm_call(vm, "main", (const rvm_value *const *)args, 2, &result));
  print_tensor("add.rvx main(a, b) = (a + b) * 3", result);
  printf("c.scale was called %d time(s)\n", calls_of_scale);

  /* The same call with a string where a tensor belongs: an error object, not a crash. */
  rvm_value *bad[2] = {NULL, args[1]};
  CHECK(rvm_value_new_str("one", 3, &bad[0]));
  rvm_value *none = NULL;
  rvm_error *err = rvm_vm_call(vm, "main", (const rvm_value *const *)bad, 2, &none);
  printf("main(\"one\", b) fails: %s\n", rvm_error_code_name(rvm_error_get_code(err)));
  rvm_error_free(err);
  CHECK(rvm_value_free(bad[0]));

  CHECK(rvm_value_free(result));
  CHECK(rvm_value_free(args[0]));
  CHECK(rvm_value_free(args[1]));
  CHECK(rvm_vm_free(vm));
}

static void run_tvm(const char *path) {
  rvm_executable *exe = NULL;
  CHECK(rvm_executable_load_file(path, NULL, &exe)); /* naming the .so consents to running it */
  rvm_vm_options opts;
  CHECK(rvm_vm_options_init_sized(&opts, sizeof opts));
  opts.step_budget = 1000000;
  rvm_vm *vm = NULL;
  CHECK(rvm_vm_create(exe, &opts, &vm));
  DLManagedTensorVersioned *x = matrix_new(1, 784);
  for (int i = 0; i < 784; i++) ((float *)x->dl_tensor.data)[i] = (float)(i % 7) / 7.0f;
  rvm_value *arg;
  CHECK(rvm_value_from_dlpack(x, &arg));
  rvm_value *y = NULL;
  CHECK(rvm_vm_call(vm, "main", (const rvm_value *const *)&arg, 1, &y));
  print_tensor("model.so main(x)", y);
  CHECK(rvm_value_free(y));
  CHECK(rvm_value_free(arg));
  CHECK(rvm_vm_free(vm));
  CHECK(rvm_executable_free(exe));
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s ADD.rvx [MODEL.so]\n", argv[0]);
    return 2;
  }
  printf("relaxvm %s\n", rvm_version());
  run_add(argv[1]);
  if (argc == 3) run_tvm(argv[2]);
  /* Every handle and string relaxvm gave out was freed. */
  if (rvm_live_handle_count() != 0) {
    fprintf(stderr, "%zu relaxvm handles were not freed\n", rvm_live_handle_count());
    return 1;
  }
  return 0;
}
