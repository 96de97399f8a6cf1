/* The guard around calls into kernel machine code (see tvm/src/ffi/guard.rs).
 *
 * A kernel that writes to read-only pages (a constant of the executable) faults. When the
 * faulting thread is inside a guarded call and the address lies in registered read-only pages,
 * the SIGSEGV/SIGBUS handler jumps back to the innermost guard, which reports the fault; the
 * frames it skips are kernel frames only (every call from Rust into kernel code is guarded, so
 * no Rust frame lies between the innermost guard and kernel code). Any other fault goes to the
 * handler installed before ours, or to the default action.
 *
 * The handler is installed with SA_NODEFER and an empty mask, so jumping out of it with
 * sigsetjmp(.., 0) (which saves no signal mask: no system call per guarded call) leaves the
 * thread's mask as it was when the kernel was called. */
#define _GNU_SOURCE
#include <setjmp.h>
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
    sigjmp_buf buf;
    struct guard *prev;
    void *fault_addr;
};

/* The innermost guard of this thread, or NULL outside guarded calls. In a library loaded with
 * dlopen (the Python extension) a thread's first access to a __thread variable may allocate its
 * block, which a signal handler must not do; the handler reads it only for a fault on registered
 * read-only pages, which no code but a guarded kernel writes to (relaxvm refuses every write
 * of its own, and numpy's views of constants are read-only), and a thread that ran a guarded
 * call has its block already. (Initial-exec TLS would need no block, but does not fit the static
 * TLS space a dlopened library may use; a pthread key costs twice as much per call.) */
static __thread struct guard *top;

static struct guard *top_get(void) { return top; }

static void top_set(struct guard *g) { top = g; }

static is_read_only_t is_read_only;
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

static void handler(int sig, siginfo_t *info, void *context) {
    /* The address first: see `top` for why the thread-local is read only then. */
    if (is_read_only != NULL && info->si_code > 0 && is_read_only((uintptr_t)info->si_addr)) {
        struct guard *g = top_get();
        if (g != NULL) {
            g->fault_addr = info->si_addr;
            top_set(g->prev);
            siglongjmp(g->buf, 1);
        }
    }
    chain(sig, info, context);
}

/* Installs the handler for SIGSEGV and SIGBUS (once; the caller serialises). 0 on success. */
int relaxvm_guard_install(is_read_only_t check) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    is_read_only = check;
    if (sigaction(SIGSEGV, &action, &previous_segv) != 0) return -1;
    if (sigaction(SIGBUS, &action, &previous_bus) != 0) return -1;
    return 0;
}

/* Calls a kernel; `*fault` is the address it faulted at (the call then returns -1 without
 * finishing), or NULL. */
int relaxvm_guard_safe_call(safe_call_t f, void *self, const TVMFFIAny *args, int32_t num_args,
                            TVMFFIAny *result, void **fault) {
    /* One lookup of this thread's `top` for the whole call (each access to a __thread variable
     * of a dlopened library is a call into the dynamic loader); the handler restores `top`
     * itself before it jumps back here. */
    struct guard **volatile slot = &top; /* volatile: kept, not recomputed after the call */
    struct guard g;
    g.prev = *slot;
    g.fault_addr = NULL;
    *fault = NULL;
    if (sigsetjmp(g.buf, 0) != 0) {
        *fault = g.fault_addr;
        return -1;
    }
    *slot = &g;
    int rc = f(self, args, num_args, result);
    *slot = g.prev;
    return rc;
}

/* Calls one task of a parallel launch; as relaxvm_guard_safe_call. */
int relaxvm_guard_lambda(lambda_t f, int task_id, void *env, void *cdata, void **fault) {
    struct guard g;
    g.prev = top_get();
    g.fault_addr = NULL;
    *fault = NULL;
    if (sigsetjmp(g.buf, 0) != 0) {
        *fault = g.fault_addr;
        return -1;
    }
    top_set(&g);
    int rc = f(task_id, env, cdata);
    top_set(g.prev);
    return rc;
}

/* Marks the thread as outside guarded calls (Rust code called back from a kernel): returns the
 * guard to restore with relaxvm_guard_resume. */
void *relaxvm_guard_suspend(void) {
    struct guard *g = top_get();
    if (g != NULL) top_set(NULL);
    return g;
}

void relaxvm_guard_resume(void *g) {
    if (g != NULL) top_set((struct guard *)g);
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
