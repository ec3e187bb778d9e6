#ifndef TUTTI_CLIBOGG_SHIM_H
#define TUTTI_CLIBOGG_SHIM_H
#include <ogg/ogg.h>
#endif
