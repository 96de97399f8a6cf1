/* Loading a TVM model with compiled functions (exec_mode="compiled": they call relaxvm's
 * AnyList functions) in a program where those functions could not bind relaxvm's definitions
 * is refused before any of the model's code runs, with an error naming the symbol and the fix.
 * Run by scripts/test-c-api.sh, with a compiled-mode model of the TVM corpus, as
 * `anylist_symbols MODE MODEL.so`:
 * - MODE "unexported": this program linked with the static C API library exporting the error
 *   function (-Wl,--export-dynamic-symbol=RVMFFIErrorSetRaisedFromCStrParts) but not the AnyList
 *   functions, so the first of them is not in the global scope;
 * - MODE "preloaded": linked with the shared library, run with LD_PRELOAD of a library that
 *   defines RVMBackendAnyListSetPackedArg (capi/tests/c/preload_anylist.c), which the compiled
 *   functions would bind instead. */
#include <stdio.h>
#include <string.h>

#include "relaxvm.h"

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), w = strlen(tail);
  return n >= w && strcmp(s + n - w, tail) == 0;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "unexported") != 0 && strcmp(argv[1], "preloaded") != 0)) {
    fprintf(stderr, "usage: %s unexported|preloaded MODEL.so\n", argv[0]);
    return 2;
  }
  int unexported = strcmp(argv[1], "unexported") == 0;
  rvm_executable *exe = NULL;
  rvm_error *err = rvm_executable_load_file(argv[2], NULL, &exe);
  if (err == NULL) {
    fprintf(stderr, "FAIL: %s loaded though its compiled functions could not bind relaxvm's AnyList functions\n",
            argv[2]);
    rvm_executable_free(exe);
    return 1;
  }
  const char *message = rvm_error_message(err);
  int ok = rvm_error_get_code(err) == RVM_ERROR_VALUE && strncmp(message, argv[2], strlen(argv[2])) == 0;
  if (unexported) {
    ok = ok && ends_with(message,
                         ": this program does not export RVMBackendAnyListSetPackedArg, which compiled functions "
                         "(exec_mode=\"compiled\") call: link it with "
                         "-Wl,--export-dynamic-symbol=RVMBackendAnyListSetPackedArg (see relaxvm-tvm's build.rs)");
  } else {
    ok = ok && strstr(message, ": RVMBackendAnyListSetPackedArg resolves to ") != NULL &&
         strstr(message, "preload_anylist.so") != NULL && ends_with(message, ", not to relaxvm");
  }
  printf("%s: %s\n", rvm_error_code_name(rvm_error_get_code(err)), message);
  rvm_error_free(err);
  if (!ok) {
    fprintf(stderr, "FAIL: not the refusal expected in mode %s\n", argv[1]);
    return 1;
  }
  return 0;
}
