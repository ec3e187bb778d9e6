#ifndef TUTTI_RECEIVE_TIME_H
#define TUTTI_RECEIVE_TIME_H

#include <stdint.h>

/// The kernel's receive time of the last datagram read from socket `fd` (SIOCGSTAMPNS), as
/// nanoseconds of CLOCK_REALTIME, into `*realtime`; and the age of that stamp, measured now
/// against CLOCK_REALTIME, into `*age`. Returns 0, or -1 with errno set (ENOENT before the
/// first stamped datagram: the first call turns stamping on). ioctl is variadic, which Swift
/// cannot call, and SIOCGSTAMPNS is a macro.
int tutti_last_receive_time(int fd, int64_t *realtime, int64_t *age);

#endif
