/* A library defining one of relaxvm's AnyList functions, preloaded ahead of librelaxvm_capi.so
 * by scripts/test-c-api.sh (see anylist_symbols.c): compiled functions would bind this one.
 * Never called. */
int RVMBackendAnyListSetPackedArg(void *list, int index, void *args, int arg_offset) {
  (void)list;
  (void)index;
  (void)args;
  (void)arg_offset;
  return 0;
}
