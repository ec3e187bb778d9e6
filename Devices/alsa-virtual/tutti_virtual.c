/*
 * tutti_virtual: an ALSA playback card that any ALSA program can play to, with no sound card.
 *
 * It emits frame n at start + n / (rate × (1 + ppm·10⁻⁶)) on the true CLOCK_MONOTONIC, read by
 * syscall so that a process whose clock is faked (libfaketime) cannot move it, and writes what it
 * emitted to a WAV file (32-bit float) and `<path>.timing.jsonl` in exactly the format of
 * Tutti's `virtual:` device: one `{"frame":F,"mono_ns":T}` line per period, and
 * `{"underrun":true,"frame":F,"frames":N,"mono_ns":T}` where the program let it run dry.
 * Its hardware pointer and delay follow that schedule, so a program that asks ALSA when a
 * frame will be heard gets the truth.
 *
 * A PCM definition names it (see docs/ALSA-VIRTUAL.md):
 *
 *   pcm_type.tutti_virtual { lib "/path/to/libasound_module_pcm_tutti_virtual.so" }
 *   pcm.room { type tutti_virtual  path "/tmp/room.wav"  ppm 25  period 480  buffer 1920 }
 *
 * A route change on command: writing `ENODEV 2000` (or `ESTRPIPE 1500`) to `<path>.fail` makes
 * the device fail with that error for that many ms from its next call (an ENODEV card cannot be
 * opened either until then); writing a number of bytes to `<path>.period` makes it the smallest
 * period of every later open, as hardware that comes back on another route may demand.
 *
 * The recording outlives the PCM: a program that closes and reopens the card (after a route
 * change, or a restart) goes on at the end of the same WAV, and every stretch the card was not
 * running is marked in the timing file by a line at its last frame and one at its next.
 */
#define _GNU_SOURCE
#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    snd_pcm_ioplug_t io;
    char *path;
    double ppm;
    unsigned int period, buffer;
    int timer;
    /* The running schedule: frame `base` of the WAV leaves at `start_ns`. */
    int64_t start_ns;
    uint64_t base;
    int running;
    /* Frames emitted so far (the WAV's length), and the program's frames not yet emitted. */
    uint64_t emitted;
    uint64_t hw;        /* frames consumed since start, the hardware pointer */
    uint64_t appl;      /* frames the program wrote since start */
    float *ring;        /* buffer frames × channels, interleaved */
    FILE *wav, *timing;
    /* A simulated route change: calls fail with -fail_error until fail_until_ns. */
    int64_t fail_until_ns;
    int fail_error;
    /* When `<path>.fail` was last looked for: at most every 10 ms, not at every call of the
     * program's audio thread. */
    int64_t checked_ns;
    /* Where the program let the card run dry, to be recorded at its next start. */
    int64_t dry_since_ns;
    uint64_t dry_frame;
} tv_t;

/* `<path>.failing` holds a route change in progress ("ENODEV <until_ns>"), so that it holds for
 * every open of the card, not only the one that read the command. */
static void failing_path(const char *path, char *out, size_t size) { snprintf(out, size, "%s.failing", path); }

static int64_t now_ns(void) {
    struct timespec ts;
    /* Not clock_gettime(): libfaketime interposes that, never the system call. */
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double frames_per_ns(tv_t *tv) { return tv->io.rate * (1.0 + tv->ppm * 1e-6) / 1e9; }

static int64_t time_of(tv_t *tv, uint64_t frame) {
    return tv->start_ns + (int64_t)((double)(frame - tv->base) / frames_per_ns(tv) + 0.5);
}

static void wav_header(tv_t *tv, uint64_t frames) {
    uint32_t channels = tv->io.channels, rate = tv->io.rate;
    uint32_t data = (uint32_t)(frames * channels * 4);
    uint8_t h[58];
    memcpy(h, "RIFF", 4);
    uint32_t riff = 50 + data;
    memcpy(h + 4, &riff, 4);
    memcpy(h + 8, "WAVEfmt ", 8);
    uint32_t fmt = 18; memcpy(h + 16, &fmt, 4);
    uint16_t tag = 3; memcpy(h + 20, &tag, 2);                 /* IEEE float */
    uint16_t ch = (uint16_t)channels; memcpy(h + 22, &ch, 2);
    memcpy(h + 24, &rate, 4);
    uint32_t bytes = rate * channels * 4; memcpy(h + 28, &bytes, 4);
    uint16_t align = (uint16_t)(channels * 4); memcpy(h + 32, &align, 2);
    uint16_t bits = 32; memcpy(h + 34, &bits, 2);
    uint16_t extra = 0; memcpy(h + 36, &extra, 2);
    memcpy(h + 38, "fact", 4);
    uint32_t four = 4; memcpy(h + 42, &four, 4);
    uint32_t count = (uint32_t)frames; memcpy(h + 46, &count, 4);
    memcpy(h + 50, "data", 4);
    memcpy(h + 54, &data, 4);
    fseek(tv->wav, 0, SEEK_SET);
    fwrite(h, 1, sizeof h, tv->wav);
    fseek(tv->wav, 0, SEEK_END);
}

/* Marks the end of a run: the time the next frame would have left. With the line at the first
 * frame of the next run (same frame, a later time), readers place every frame of both runs, and
 * the gap between them, exactly. */
static void end_run(tv_t *tv) {
    if (!tv->running) return;
    fprintf(tv->timing, "{\"frame\":%llu,\"mono_ns\":%lld}\n", (unsigned long long)tv->emitted, (long long)time_of(tv, tv->base + tv->hw));
    fflush(tv->timing);
    tv->running = 0;
}

/* Emits the program's frames up to the schedule's position now; past what it wrote, the card
 * runs dry (an xrun). Returns 0, or -EPIPE on running dry. */
static int advance(tv_t *tv) {
    if (!tv->running) return 0;
    int64_t t = now_ns();
    double due = (double)(t - tv->start_ns) * frames_per_ns(tv);
    uint64_t target = due > 0 ? (uint64_t)due : 0;
    unsigned int channels = tv->io.channels;
    while (tv->hw < target) {
        if (tv->hw >= tv->appl) {
            tv->dry_since_ns = time_of(tv, tv->base + tv->hw);
            tv->dry_frame = tv->emitted;
            end_run(tv);
            return -EPIPE;
        }
        uint64_t frame = tv->base + tv->hw;
        if (tv->hw % tv->io.period_size == 0)
            fprintf(tv->timing, "{\"frame\":%llu,\"mono_ns\":%lld}\n", (unsigned long long)tv->emitted, (long long)time_of(tv, frame));
        fwrite(tv->ring + (tv->hw % tv->io.buffer_size) * channels, sizeof(float), channels, tv->wav);
        tv->emitted++;
        tv->hw++;
    }
    return 0;
}

/* The route change in effect for `path` (its error, or 0), read from `<path>.failing`. */
static int route_failure(const char *path, int64_t now, int64_t *until) {
    char state[4096];
    failing_path(path, state, sizeof state);
    FILE *f = fopen(state, "r");
    if (!f) return 0;
    char name[32] = {0};
    long long end = 0;
    int error = 0;
    if (fscanf(f, "%31s %lld", name, &end) == 2 && end > now) {
        error = strcmp(name, "ESTRPIPE") == 0 ? ESTRPIPE : ENODEV;
        *until = end;
    }
    fclose(f);
    if (!error) unlink(state);
    return error;
}

static int failing(tv_t *tv) {
    int64_t t = now_ns();
    if (tv->fail_until_ns > t) return -tv->fail_error;
    if (t - tv->checked_ns < 10000000) return 0;
    tv->checked_ns = t;
    char control[4096];
    snprintf(control, sizeof control, "%s.fail", tv->path);
    FILE *f = fopen(control, "r");
    if (f) {
        char name[32] = {0};
        long ms = 0;
        if (fscanf(f, "%31s %ld", name, &ms) == 2 && ms > 0) {
            int error = strcmp(name, "ESTRPIPE") == 0 ? ESTRPIPE : ENODEV;
            char state[4096];
            failing_path(tv->path, state, sizeof state);
            FILE *out = fopen(state, "w");
            if (out) {
                fprintf(out, "%s %lld\n", error == ESTRPIPE ? "ESTRPIPE" : "ENODEV", (long long)(t + ms * 1000000));
                fclose(out);
            }
        }
        fclose(f);
        unlink(control);
    }
    int64_t until = 0;
    int error = route_failure(tv->path, t, &until);
    if (error) {
        /* The route goes: what was due has left, nothing more will until the program reopens
         * or restarts the card after the failure. */
        advance(tv);
        end_run(tv);
        tv->fail_error = error;
        tv->fail_until_ns = until;
        return -error;
    }
    return 0;
}

static int tv_start(snd_pcm_ioplug_t *io) {
    tv_t *tv = io->private_data;
    int bad = failing(tv);
    if (bad) return bad;
    int64_t t = now_ns();
    if (tv->dry_since_ns) {
        int64_t gap = t - tv->dry_since_ns;
        fprintf(tv->timing, "{\"underrun\":true,\"frame\":%llu,\"frames\":%lld,\"mono_ns\":%lld}\n",
                (unsigned long long)tv->dry_frame, (long long)((double)gap * frames_per_ns(tv)), (long long)tv->dry_since_ns);
        tv->dry_since_ns = 0;
    }
    tv->start_ns = t;
    tv->base = tv->emitted;
    tv->hw = 0;
    tv->running = 1;
    /* The poll descriptor: a timer at every period boundary of the schedule. */
    struct itimerspec spec = {0};
    int64_t period_ns = (int64_t)(io->period_size / frames_per_ns(tv));
    spec.it_value.tv_sec = period_ns / 1000000000;
    spec.it_value.tv_nsec = period_ns % 1000000000;
    spec.it_interval = spec.it_value;
    timerfd_settime(tv->timer, 0, &spec, NULL);
    return 0;
}

static int tv_stop(snd_pcm_ioplug_t *io) {
    tv_t *tv = io->private_data;
    advance(tv);
    end_run(tv);
    struct itimerspec off = {0};
    timerfd_settime(tv->timer, 0, &off, NULL);
    fflush(tv->timing);
    return 0;
}

static snd_pcm_sframes_t tv_pointer(snd_pcm_ioplug_t *io) {
    tv_t *tv = io->private_data;
    int bad = failing(tv);
    if (bad) return bad;
    int result = advance(tv);
    if (result < 0) return result;
    return (snd_pcm_sframes_t)(tv->hw % io->buffer_size);
}

static snd_pcm_sframes_t tv_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas, snd_pcm_uframes_t offset,
                                     snd_pcm_uframes_t size) {
    tv_t *tv = io->private_data;
    int bad = failing(tv);
    if (bad) return bad;
    unsigned int channels = io->channels;
    for (snd_pcm_uframes_t i = 0; i < size; i++) {
        float *out = tv->ring + ((tv->appl + i) % io->buffer_size) * channels;
        for (unsigned int c = 0; c < channels; c++) {
            const snd_pcm_channel_area_t *a = &areas[c];
            const char *p = (const char *)a->addr + (a->first + (offset + i) * a->step) / 8;
            switch (io->format) {
            case SND_PCM_FORMAT_FLOAT_LE: out[c] = *(const float *)p; break;
            case SND_PCM_FORMAT_S16_LE: out[c] = *(const int16_t *)p / 32768.0f; break;
            case SND_PCM_FORMAT_S32_LE: out[c] = (float)(*(const int32_t *)p / 2147483648.0); break;
            default: out[c] = 0; break;
            }
        }
    }
    tv->appl += size;
    return (snd_pcm_sframes_t)size;
}

static int tv_delay(snd_pcm_ioplug_t *io, snd_pcm_sframes_t *delay) {
    tv_t *tv = io->private_data;
    int bad = failing(tv);
    if (bad) return bad;
    advance(tv);
    /* Frames written and not yet emitted, less the part of the current frame already gone. */
    *delay = (snd_pcm_sframes_t)(tv->appl - tv->hw);
    return 0;
}

static int tv_prepare(snd_pcm_ioplug_t *io) {
    tv_t *tv = io->private_data;
    int bad = failing(tv);
    if (bad) return bad;
    end_run(tv);
    tv->hw = 0;
    tv->appl = 0;
    free(tv->ring);
    tv->ring = calloc(io->buffer_size * io->channels, sizeof(float));
    if (!tv->wav) {
        /* Go on with the recording at this path if it holds the same stream (a reopen after a
         * route change, or the program restarted); start it afresh otherwise. */
        char timing[4096];
        snprintf(timing, sizeof timing, "%s.timing.jsonl", tv->path);
        tv->wav = fopen(tv->path, "r+b");
        if (tv->wav) {
            uint8_t h[58];
            uint16_t tag = 0, ch = 0;
            uint32_t rate = 0;
            int same = fread(h, 1, sizeof h, tv->wav) == sizeof h && access(timing, F_OK) == 0;
            if (same) {
                memcpy(&tag, h + 20, 2);
                memcpy(&ch, h + 22, 2);
                memcpy(&rate, h + 24, 4);
                same = memcmp(h + 50, "data", 4) == 0 && tag == 3 && ch == io->channels && rate == io->rate;
            }
            if (same) {
                fseek(tv->wav, 0, SEEK_END);
                long size = ftell(tv->wav);
                tv->emitted = (uint64_t)(size - 58) / (io->channels * 4);
                /* A program killed mid-write may leave part of a frame: cut it. */
                if (ftruncate(fileno(tv->wav), 58 + (off_t)(tv->emitted * io->channels * 4)) != 0) { /* the header still says */ }
                fseek(tv->wav, 0, SEEK_END);
                tv->timing = fopen(timing, "a");
            } else {
                fclose(tv->wav);
                tv->wav = NULL;
            }
        }
        if (!tv->wav) {
            tv->wav = fopen(tv->path, "w+b");
            tv->timing = fopen(timing, "w");
            tv->emitted = 0;
            if (tv->wav) wav_header(tv, 0);
        }
        if (!tv->wav || !tv->timing) return -errno;
    }
    return tv->ring ? 0 : -ENOMEM;
}

static int tv_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds, unsigned short *revents) {
    tv_t *tv = io->private_data;
    uint64_t expirations;
    if (nfds == 1 && (pfd[0].revents & POLLIN)) {
        if (read(tv->timer, &expirations, sizeof expirations) < 0) { /* nothing due yet */ }
    }
    snd_pcm_sframes_t avail = snd_pcm_avail_update(io->pcm);
    *revents = (avail < 0 || avail >= (snd_pcm_sframes_t)io->period_size) ? POLLOUT : 0;
    return 0;
}

static int tv_close(snd_pcm_ioplug_t *io) {
    tv_t *tv = io->private_data;
    if (tv->running) { advance(tv); end_run(tv); }
    if (tv->wav) {
        wav_header(tv, tv->emitted);
        fclose(tv->wav);
    }
    if (tv->timing) fclose(tv->timing);
    close(tv->timer);
    free(tv->ring);
    free(tv->path);
    free(tv);
    return 0;
}

static const snd_pcm_ioplug_callback_t callbacks = {
    .start = tv_start,
    .stop = tv_stop,
    .pointer = tv_pointer,
    .transfer = tv_transfer,
    .delay = tv_delay,
    .prepare = tv_prepare,
    .poll_revents = tv_poll_revents,
    .close = tv_close,
};

SND_PCM_PLUGIN_DEFINE_FUNC(tutti_virtual) {
    snd_config_iterator_t i, next;
    const char *path = NULL;
    double ppm = 0;
    long period = 480, buffer = 1920;
    snd_config_for_each(i, next, conf) {
        snd_config_t *n = snd_config_iterator_entry(i);
        const char *id;
        if (snd_config_get_id(n, &id) < 0) continue;
        if (!strcmp(id, "comment") || !strcmp(id, "type") || !strcmp(id, "hint")) continue;
        if (!strcmp(id, "path")) { snd_config_get_string(n, &path); continue; }
        if (!strcmp(id, "ppm")) {
            long whole;
            if (snd_config_get_real(n, &ppm) < 0 && snd_config_get_integer(n, &whole) == 0) ppm = whole;
            continue;
        }
        if (!strcmp(id, "period")) { snd_config_get_integer(n, &period); continue; }
        if (!strcmp(id, "buffer")) { snd_config_get_integer(n, &buffer); continue; }
        SNDERR("tutti_virtual: unknown field %s", id);
        return -EINVAL;
    }
    if (!path) {
        SNDERR("tutti_virtual: give the WAV file's path (path \"/tmp/room.wav\")");
        return -EINVAL;
    }
    int64_t until = 0;
    if (route_failure(path, now_ns(), &until) == ENODEV) return -ENODEV;
    tv_t *tv = calloc(1, sizeof *tv);
    if (!tv) return -ENOMEM;
    tv->path = strdup(path);
    tv->ppm = ppm;
    /* The smallest period in bytes: twice the configured frames (16-bit mono, the smallest
     * frame), unless a route change set it. */
    long min_period_bytes = 2 * period;
    char override[4096];
    snprintf(override, sizeof override, "%s.period", path);
    FILE *f = fopen(override, "r");
    if (f) {
        long bytes;
        if (fscanf(f, "%ld", &bytes) == 1 && bytes >= 64) min_period_bytes = bytes;
        fclose(f);
    }
    tv->period = (unsigned int)period;
    tv->buffer = (unsigned int)buffer;
    tv->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    tv->io.version = SND_PCM_IOPLUG_VERSION;
    tv->io.name = "Tutti virtual sound card";
    tv->io.callback = &callbacks;
    tv->io.private_data = tv;
    tv->io.poll_fd = tv->timer;
    tv->io.poll_events = POLLIN;
    tv->io.mmap_rw = 0;
    tv->io.flags = SND_PCM_IOPLUG_FLAG_MONOTONIC;
    int err = snd_pcm_ioplug_create(&tv->io, name, stream, mode);
    if (err < 0) { close(tv->timer); free(tv->path); free(tv); return err; }
    static const unsigned int accesses[] = { SND_PCM_ACCESS_RW_INTERLEAVED, SND_PCM_ACCESS_RW_NONINTERLEAVED };
    static const unsigned int formats[] = { SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_FLOAT_LE };
    unsigned int bytes_max = 8;  /* the widest frame sample, for the byte constraints */
    if ((err = snd_pcm_ioplug_set_param_list(&tv->io, SND_PCM_IOPLUG_HW_ACCESS, 2, accesses)) < 0 ||
        (err = snd_pcm_ioplug_set_param_list(&tv->io, SND_PCM_IOPLUG_HW_FORMAT, 3, formats)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&tv->io, SND_PCM_IOPLUG_HW_CHANNELS, 1, 8)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&tv->io, SND_PCM_IOPLUG_HW_RATE, 8000, 192000)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&tv->io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, (unsigned)min_period_bytes,
                                                bytes_max * 8 * (unsigned)(min_period_bytes / 2 > period ? min_period_bytes / 2 : period))) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&tv->io, SND_PCM_IOPLUG_HW_PERIODS, (unsigned)(buffer / period), (unsigned)(buffer / period))) < 0) {
        snd_pcm_ioplug_delete(&tv->io);
        return err;
    }
    *pcmp = tv->io.pcm;
    return 0;
}

SND_PCM_PLUGIN_SYMBOL(tutti_virtual);
