#ifndef TUTTI_THREAD_NAME_H
#define TUTTI_THREAD_NAME_H

/// Names the calling thread (its first 15 bytes), as `top -H`, perf and /proc/PID/task/*/comm
/// show it. pthread_setname_np needs _GNU_SOURCE, which Swift's Glibc module does not define.
void tutti_name_current_thread(const char *name);

#endif
