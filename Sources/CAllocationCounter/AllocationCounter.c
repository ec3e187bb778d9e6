// Interposes the C allocator for the test process. Every allocation is forwarded to glibc;
// calls made by a thread that opted in with tutti_alloc_track_begin() are counted.
// This catches Swift's hidden allocations (array growth, string interpolation, boxing),
// because the Swift runtime allocates through malloc/posix_memalign.
#include "CAllocationCounter.h"
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static __thread int tracking __attribute__((tls_model("initial-exec")));
static __thread int64_t allocations __attribute__((tls_model("initial-exec")));

static inline void note(void) { if (tracking) allocations++; }

void *malloc(size_t size) { note(); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { note(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { note(); return __libc_realloc(p, size); }
void *memalign(size_t alignment, size_t size) { note(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { note(); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    note();
    void *p = __libc_memalign(alignment, size);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void tutti_alloc_track_begin(void) { allocations = 0; tracking = 1; }
int64_t tutti_alloc_track_end(void) { tracking = 0; return allocations; }
int64_t tutti_alloc_track_count(void) { return allocations; }
