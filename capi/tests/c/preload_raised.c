/* A library defining relaxvm's error function, preloaded ahead of librelaxvm_capi.so by
 * scripts/test-c-api.sh (see runtime_symbols.c): kernels would bind this one. Never called. */
int RVMFFIErrorSetRaisedFromCStrParts(const char *kind, const char **parts, int n) {
  (void)kind;
  (void)parts;
  (void)n;
  return 0;
}
