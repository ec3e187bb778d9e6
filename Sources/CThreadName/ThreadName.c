#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include "CThreadName.h"

void tutti_name_current_thread(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    pthread_setname_np(pthread_self(), truncated);
}
