#ifndef TUTTI_CALSA_SHIM_H
#define TUTTI_CALSA_SHIM_H
#include <alsa/asoundlib.h>

// ALSA prints "cannot find card" and similar to stderr through a variadic handler, which Swift
// cannot define. On machines with no sound card that noise is expected, so Tutti installs this one.
static void tutti_alsa_quiet_error_handler(const char *file, int line, const char *function, int err,
                                           const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
static inline void tutti_alsa_silence_errors(void) { snd_lib_error_set_handler(tutti_alsa_quiet_error_handler); }
#endif
