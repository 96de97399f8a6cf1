/* A program linked with the static C API library and without the export flags of
 * relaxvm-tvm's build.rs: it cannot give TVM kernels relaxvm's error function, so loading a TVM
 * model must be refused with an error naming the missing symbol and the link flag, before any
 * of the model's code runs. Run by scripts/test-c-api.sh: unexported MODEL.so. */
#include <stdio.h>
#include <string.h>

#include "relaxvm.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.so\n", argv[0]);
    return 2;
  }
  rvm_executable *exe = NULL;
  rvm_error *err = rvm_executable_load_file(argv[1], NULL, &exe);
  if (err == NULL) {
    fprintf(stderr, "FAIL: %s loaded in a program that does not export the runtime symbols\n", argv[1]);
    rvm_executable_free(exe);
    return 1;
  }
  const char *want =
      ": this program does not export RVMFFIErrorSetRaisedFromCStrParts for TVM kernels to bind: "
      "link it with -Wl,--export-dynamic-symbol=RVMFFIErrorSetRaisedFromCStrParts (see relaxvm-tvm's build.rs)";
  const char *message = rvm_error_message(err);
  size_t n = strlen(message), w = strlen(want);
  int ok = rvm_error_get_code(err) == RVM_ERROR_VALUE && n > w && strcmp(message + n - w, want) == 0 &&
           strncmp(message, argv[1], strlen(argv[1])) == 0;
  printf("%s: %s\n", rvm_error_code_name(rvm_error_get_code(err)), message);
  rvm_error_free(err);
  if (!ok) {
    fprintf(stderr, "FAIL: expected %s%s\n", argv[1], want);
    return 1;
  }
  return 0;
}
