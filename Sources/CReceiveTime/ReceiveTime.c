#include <errno.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <time.h>
#include "CReceiveTime.h"

int tutti_last_receive_time(int fd, int64_t *realtime, int64_t *age) {
    struct timespec stamp;
    if (ioctl(fd, SIOCGSTAMPNS, &stamp) != 0) return -1;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    *realtime = (int64_t)stamp.tv_sec * 1000000000 + stamp.tv_nsec;
    *age = ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec) - *realtime;
    return 0;
}
