#ifndef TUTTI_ALLOCATION_COUNTER_H
#define TUTTI_ALLOCATION_COUNTER_H
#include <stdint.h>

/// Starts counting heap allocations made by the calling thread (resets its count).
void tutti_alloc_track_begin(void);
/// Stops counting on the calling thread and returns the allocations made since `begin`.
int64_t tutti_alloc_track_end(void);
/// Allocations made so far by the calling thread since `begin`, without stopping.
int64_t tutti_alloc_track_count(void);
#endif
