// The C API from C++: owning wrappers (std::unique_ptr with relaxvm's free functions), errors
// as exceptions, a TVM-compiled model run on a std::vector's memory without a copy, and the
// profiler's report.
//
//   run_model_cpp ADD.rvx [MODEL.so]
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "relaxvm.h"

namespace {

// An rvm_error as a C++ exception (the error object is freed here).
struct Error : std::runtime_error {
  rvm_error_code code;
  explicit Error(rvm_error *e)
      : std::runtime_error(std::string(rvm_error_code_name(rvm_error_get_code(e))) + ": " +
                           rvm_error_message(e)),
        code(rvm_error_get_code(e)) {
    rvm_error_free(e);
  }
};

void check(rvm_error *e) {
  if (e) throw Error(e);
}

struct FreeValue {
  void operator()(rvm_value *v) const { rvm_error_free(rvm_value_free(v)); }
};
struct FreeVm {
  void operator()(rvm_vm *vm) const { rvm_error_free(rvm_vm_free(vm)); }
};
struct FreeExe {
  void operator()(rvm_executable *e) const { rvm_error_free(rvm_executable_free(e)); }
};
struct FreeString {
  void operator()(char *s) const { rvm_error_free(rvm_string_free(s)); }
};
using Value = std::unique_ptr<rvm_value, FreeValue>;
using Vm = std::unique_ptr<rvm_vm, FreeVm>;
using Executable = std::unique_ptr<rvm_executable, FreeExe>;
using String = std::unique_ptr<char, FreeString>;

Executable load(const char *path) {
  rvm_executable *exe = nullptr;
  check(rvm_executable_load_file(path, nullptr, &exe));
  return Executable(exe);
}

// A float32 tensor viewing `data` (which must outlive every use relaxvm makes of it: the
// deleter only frees the header).
Value tensor_view(std::vector<float> &data, std::vector<int64_t> shape) {
  struct Header {
    DLManagedTensorVersioned managed{};
    std::vector<int64_t> shape;
  };
  auto *h = new Header{};
  h->shape = std::move(shape);
  h->managed.version.major = RVM_DLPACK_MAJOR_VERSION;
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensorVersioned *m) { delete static_cast<Header *>(m->manager_ctx); };
  DLTensor &t = h->managed.dl_tensor;
  t.data = data.data();
  t.device.device_type = RVM_DLPACK_CPU;
  t.ndim = static_cast<int32_t>(h->shape.size());
  t.dtype.code = 2;  // kDLFloat
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = h->shape.data();
  rvm_value *v = nullptr;
  if (rvm_error *e = rvm_value_from_dlpack(&h->managed, &v)) {
    delete h;  // not taken on error
    throw Error(e);
  }
  return Value(v);
}

std::string text(const rvm_value *v) {
  char *s = nullptr;
  check(rvm_value_to_string(v, &s));
  return String(s).get();
}

// A callback must return to relaxvm: no exception may leave it (Rust cannot unwind one; the
// process would end), so it catches everything and returns an error object instead.
rvm_error *c_scale(void *, const rvm_value *const *args, size_t nargs, rvm_value **result) noexcept {
  try {
    if (nargs != 2) throw std::invalid_argument("expected 2 arguments");
    // A registered function may simply return its first argument, shared (cloned handle).
    check(rvm_value_clone(args[0], result));
    return nullptr;
  } catch (const Error &e) {
    return rvm_error_new(e.code, e.what());
  } catch (const std::exception &e) {
    return rvm_error_new(RVM_ERROR_OTHER, e.what());
  } catch (...) {
    return rvm_error_new(RVM_ERROR_OTHER, "unknown C++ exception");
  }
}

}  // namespace

int main(int argc, char **argv) try {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s ADD.rvx [MODEL.so]\n", argv[0]);
    return 2;
  }
  check(rvm_register_func("c.scale", c_scale, nullptr, nullptr, true));
  {
    Executable exe = load(argv[1]);
    rvm_vm *raw = nullptr;
    check(rvm_vm_create(exe.get(), nullptr, &raw));
    Vm vm(raw);
    std::vector<float> a{1, 2, 3}, b{10, 20, 30};
    Value x = tensor_view(a, {3}), y = tensor_view(b, {3});
    rvm_value *f = nullptr;
    check(rvm_vm_get_function(vm.get(), "main", &f));
    Value main_fn(f);
    const rvm_value *args[] = {x.get(), y.get()};
    rvm_value *r = nullptr;
    check(rvm_vm_invoke(vm.get(), main_fn.get(), args, 2, &r));
    std::printf("add.rvx main(a, b) with c.scale returning its input: %s\n", text(Value(r).get()).c_str());
    try {
      rvm_value *none = nullptr;
      check(rvm_vm_call(vm.get(), "mian", args, 2, &none));
    } catch (const Error &e) {
      std::printf("a misspelt name: %s\n", e.what());
    }
  }
  if (argc == 3) {
    Executable exe = load(argv[2]);
    rvm_vm_options opts;
    check(rvm_vm_options_init_sized(&opts, sizeof opts));
    opts.profile = true;
    rvm_vm *raw = nullptr;
    check(rvm_vm_create(exe.get(), &opts, &raw));
    Vm vm(raw);
    std::vector<float> input(784, 0.5f);
    Value x = tensor_view(input, {1, 784});
    const rvm_value *args[] = {x.get()};
    rvm_value *r = nullptr;
    check(rvm_vm_call(vm.get(), "main", args, 1, &r));
    Value result(r);
    char *report = nullptr;
    check(rvm_vm_profile(vm.get(), "main", args, 1, RVM_PROFILE_TABLE, &report));
    String rep(report);
    std::printf("model.so main(x) = %s\n%s", text(result.get()).c_str(), rep.get());
  }
  if (size_t n = rvm_live_handle_count()) {
    std::fprintf(stderr, "%zu relaxvm handles were not freed\n", n);
    return 1;
  }
  return 0;
} catch (const Error &e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
