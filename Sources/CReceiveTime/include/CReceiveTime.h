#ifndef TUTTI_RECEIVE_TIME_H
#define TUTTI_RECEIVE_TIME_H

#include <stdint.h>

/// The kernel's receive time of the last datagram read from socket `fd` (SIOCGSTAMPNS), as
/// nanoseconds of CLOCK_REALTIME, into `*stamp`; and, read at once after it, CLOCK_REALTIME
/// and CLOCK_MONOTONIC now, into `*realtime` and `*monotonic` (their difference moves only
/// when the wall clock is stepped). Returns 0, or -1 with errno set (ENOENT before the first
/// stamped datagram: the first call turns stamping on). ioctl is variadic, which Swift cannot
/// call, and SIOCGSTAMPNS is a macro.
int tutti_last_receive_time(int fd, int64_t *stamp, int64_t *realtime, int64_t *monotonic);

#endif
