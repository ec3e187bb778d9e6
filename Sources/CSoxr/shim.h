#ifndef TUTTI_CSOXR_SHIM_H
#define TUTTI_CSOXR_SHIM_H
#include <soxr.h>
#endif
