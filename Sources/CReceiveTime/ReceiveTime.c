#include <errno.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <time.h>
#include "CReceiveTime.h"

static int64_t nanoseconds(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

int tutti_last_receive_time(int fd, int64_t *stamp, int64_t *realtime, int64_t *monotonic) {
    struct timespec received;
    if (ioctl(fd, SIOCGSTAMPNS, &received) != 0) return -1;
    struct timespec real, mono;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    *stamp = nanoseconds(received);
    *realtime = nanoseconds(real);
    *monotonic = nanoseconds(mono);
    return 0;
}
