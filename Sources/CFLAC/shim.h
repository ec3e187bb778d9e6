#ifndef TUTTI_CFLAC_SHIM_H
#define TUTTI_CFLAC_SHIM_H
#include <FLAC/stream_decoder.h>
#endif
