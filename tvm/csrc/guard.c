/* The guard around calls into kernel machine code (see tvm/src/ffi/guard.rs).
 *
 * A kernel that writes to read-only pages (a constant of the executable) faults. When the
 * faulting thread is inside a guarded call and the address lies in registered read-only pages,
 * the SIGSEGV/SIGBUS handler jumps back to the innermost guard, which reports the fault; the
 * frames it skips are kernel frames only (every call from Rust into kernel code is guarded, so
 * no Rust frame lies between the innermost guard and kernel code). Any other fault goes to the
 * handler installed before ours, or to the default action.
 *
 * The jump is the compiler's own non-local goto (__builtin_setjmp / __builtin_longjmp, which
 * GCC and Clang provide): the buffer holds the frame pointer, the stack pointer and the
 * address to resume at, and the function that arms it saves every callee-saved register
 * itself (the compiler treats them all as clobbered at the resume point). Arming it is three
 * stores, where glibc's sigsetjmp saves and mangles eight registers in a call of its own
 * (about 26 instructions), on every kernel call. No signal mask is saved or restored by
 * either: the handler is installed with SA_NODEFER and an empty mask, so jumping out of it
 * leaves the thread's mask as it was when the kernel was called. (The jump buffer lives in the
 * guard's own frame, below the kernel's: a kernel that overruns its stack frame can overwrite
 * a return address just as well, so glibc's pointer mangling would add no protection.)
 *
 * Each thread's innermost guard lives in a thread-local of the Rust side (one block with the
 * raised-error flag, so that a kernel call looks up one thread-local): guarded calls get its
 * address as an argument, the handler through a function the Rust side installs. */
#define _GNU_SOURCE
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t type_index;
    uint32_t small_str_len;
    uint64_t payload;
} TVMFFIAny;

typedef int (*safe_call_t)(void *self, const TVMFFIAny *args, int32_t num_args, TVMFFIAny *result);
typedef int (*lambda_t)(int task_id, void *env, void *cdata);
typedef int (*is_read_only_t)(uintptr_t addr);

struct guard {
    /* __builtin_setjmp's buffer: five words. */
    void *buf[5];
    struct guard *prev;
    void *fault_addr;
};

/* This thread's innermost guard slot (see `top_slot` in thread_state.rs for why the handler
 * may call it). */
typedef struct guard **(*top_slot_t)(void);

static is_read_only_t is_read_only;
static top_slot_t top_slot;
static struct sigaction previous_segv, previous_bus;

static void chain(int sig, siginfo_t *info, void *context) {
    struct sigaction *prev = sig == SIGBUS ? &previous_bus : &previous_segv;
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, info, context);
        return;
    }
    if (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN) {
        /* Back to the default action; returning re-runs the faulting instruction, which then
         * ends the process as it would have without us. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        return;
    }
    prev->sa_handler(sig);
}

/* Not inlined into the handler: __builtin_longjmp may not be called from a function that
 * also arms a buffer, and a separate frame keeps the handler itself ordinary. */
static void __attribute__((noinline, noreturn)) jump_back(struct guard **slot, struct guard *g, void *addr) {
    g->fault_addr = addr;
    *slot = g->prev;
    __builtin_longjmp(g->buf, 1);
}

static void handler(int sig, siginfo_t *info, void *context) {
    /* The address first: see `top_slot` for why the thread-local is read only then. */
    if (is_read_only != NULL && info->si_code > 0 && is_read_only((uintptr_t)info->si_addr)) {
        struct guard **slot = top_slot();
        struct guard *g = *slot;
        if (g != NULL) jump_back(slot, g, info->si_addr);
    }
    chain(sig, info, context);
}

/* Installs the handler for SIGSEGV and SIGBUS (once; the caller serialises). 0 on success. */
int relaxvm_guard_install(is_read_only_t check, top_slot_t slot) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    top_slot = slot;
    is_read_only = check;
    if (sigaction(SIGSEGV, &action, &previous_segv) != 0) return -1;
    if (sigaction(SIGBUS, &action, &previous_bus) != 0) return -1;
    return 0;
}

/* Calls a kernel under a guard pushed on `slot` (this thread's, from the Rust side); `*fault`
 * is the address it faulted at (the call then returns -1 without finishing), or NULL. */
int relaxvm_guard_safe_call(struct guard **slot, safe_call_t f, void *self, const TVMFFIAny *args,
                            int32_t num_args, TVMFFIAny *result, void **fault) {
    struct guard g;
    g.prev = *slot;
    g.fault_addr = NULL;
    *fault = NULL;
    /* Neither `slot` nor `fault` changes after the buffer is armed, and `g` is in memory, so
     * both read the right values when the handler jumps back here (which restores `*slot`
     * itself before it jumps). */
    if (__builtin_setjmp(g.buf) != 0) {
        *fault = g.fault_addr;
        return -1;
    }
    *slot = &g;
    int rc = f(self, args, num_args, result);
    *slot = g.prev;
    return rc;
}

/* Calls one task of a parallel launch; as relaxvm_guard_safe_call. */
int relaxvm_guard_lambda(struct guard **slot, lambda_t f, int task_id, void *env, void *cdata, void **fault) {
    struct guard g;
    g.prev = *slot;
    g.fault_addr = NULL;
    *fault = NULL;
    if (__builtin_setjmp(g.buf) != 0) {
        *fault = g.fault_addr;
        return -1;
    }
    *slot = &g;
    int rc = f(task_id, env, cdata);
    *slot = g.prev;
    return rc;
}

/* Test support: a "kernel" that stores `value` at the address its one argument carries. */
int relaxvm_guard_test_store(void *self, const TVMFFIAny *args, int32_t num_args, TVMFFIAny *result) {
    (void)self;
    (void)result;
    if (num_args < 1) return -2;
    *(volatile uint8_t *)(uintptr_t)args[0].payload = 7;
    return 0;
}

/* Test support: the same as a parallel task; `cdata` is the address. */
int relaxvm_guard_test_store_task(int task_id, void *env, void *cdata) {
    (void)task_id;
    (void)env;
    *(volatile uint8_t *)cdata = 7;
    return 0;
}
