#ifndef TUTTI_CEBUR128_SHIM_H
#define TUTTI_CEBUR128_SHIM_H
#include <ebur128.h>
#endif
