#ifndef TUTTI_CFFMPEG_SHIM_H
#define TUTTI_CFFMPEG_SHIM_H

#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavcodec/vorbis_parser.h>
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>

// Function-like and compound macros do not import into Swift; these wrappers expose them.
static inline int tutti_averror_eof(void) { return AVERROR_EOF; }
static inline int tutti_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int tutti_averror(int posixError) { return AVERROR(posixError); }
static inline int64_t tutti_av_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline int tutti_disposition_attached_pic(void) { return AV_DISPOSITION_ATTACHED_PIC; }
static inline int tutti_avfmt_duration_from_bitrate(void) { return AVFMT_DURATION_FROM_BITRATE; }

/// Silences libav* logging below `level` (the library prints warnings to stderr by default).
static inline void tutti_av_log_quiet(int level) { av_log_set_level(level); }

#endif
