/* Counts the CUDA runtime calls that move data to the host or wait for the device, for the
 * GPU tier's "no host synchronisation" tests (test_cuda_checks.py): preloaded into a child
 * process (LD_PRELOAD), each wrapper counts and forwards to the real function. Read with
 * ctypes: ember_cuda_traffic() -> long[9] = copies by cudaMemcpyKind (0 host->host,
 * 1 host->device, 2 device->host, 3 device->device, 4 default: the runtime tells from the
 * addresses), stream synchronisations, device synchronisations, event synchronisations, and
 * [8] the default-kind copies whose source is device memory and destination host memory. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;

static long counts[9];

long *ember_cuda_traffic(void) { return counts; }

static void *real(const char *name) { return dlsym(RTLD_NEXT, name); }

/* cudaMemoryType of an address: 0 unregistered host, 1 pinned host, 2 device, 3 managed
 * (the first field of cudaPointerAttributes; the struct is read into a generous buffer) */
static int memory_type(const void *p) {
    static cudaError_t (*f)(void *, const void *);
    static cudaError_t (*clear)(void);
    int attrs[64] = {0};
    if (!f) f = real("cudaPointerGetAttributes");
    if (!clear) clear = real("cudaGetLastError");
    if (!f || f(attrs, p) != 0) {
        if (clear) clear();
        return 0;
    }
    return attrs[0];
}

static void count_copy(void *dst, const void *src, int kind) {
    counts[(kind >= 0 && kind <= 4) ? kind : 4]++;
    if (kind == 4 && memory_type(dst) <= 1 && memory_type(src) >= 2) counts[8]++;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
    static cudaError_t (*f)(void *, const void *, size_t, int);
    if (!f) f = real("cudaMemcpy");
    count_copy(dst, src, kind);
    return f(dst, src, n, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, cudaStream_t s) {
    static cudaError_t (*f)(void *, const void *, size_t, int, cudaStream_t);
    if (!f) f = real("cudaMemcpyAsync");
    count_copy(dst, src, kind);
    return f(dst, src, n, kind, s);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    static cudaError_t (*f)(cudaStream_t);
    if (!f) f = real("cudaStreamSynchronize");
    counts[5]++;
    return f(s);
}

cudaError_t cudaDeviceSynchronize(void) {
    static cudaError_t (*f)(void);
    if (!f) f = real("cudaDeviceSynchronize");
    counts[6]++;
    return f();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    static cudaError_t (*f)(cudaEvent_t);
    if (!f) f = real("cudaEventSynchronize");
    counts[7]++;
    return f(e);
}
