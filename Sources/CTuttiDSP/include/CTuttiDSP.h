#ifndef TUTTI_DSP_H
#define TUTTI_DSP_H

/// The inner product of `VariableRateResampler`: one output frame from a window of `taps` input
/// frames per channel, with the kernel interpolated between two tabulated phases,
/// `kernel[j] = row[j] + weight * difference[j]`.
///
/// Vectorized for the widest unit the CPU has (AVX where present, chosen once at load time,
/// else SSE), with the same operations lane by lane and the same summation tree in every
/// version, so a given input gives the same bits on every x86-64 machine: the simulated house
/// replays bit for bit anywhere. No fused multiply-add (baseline x86-64 has none), no
/// allocation, no locks: callable from the real-time thread.
///
/// `window`, `left`, `right`: `taps` consecutive samples of one channel (planar).

/// One channel.
float tutti_resample_frame_mono(const float *row, const float *difference, float weight,
                                const float *window, int taps);

/// Two channels; writes `out[0]` (left) and `out[1]` (right).
void tutti_resample_frame_stereo(const float *row, const float *difference, float weight,
                                 const float *left, const float *right, int taps, float *out);

/// For tests: the baseline versions (SSE on x86-64), and whether the dispatched ones use AVX,
/// so a test can check that both give the same bits.
float tutti_resample_frame_mono_baseline(const float *row, const float *difference, float weight,
                                         const float *window, int taps);
void tutti_resample_frame_stereo_baseline(const float *row, const float *difference, float weight,
                                          const float *left, const float *right, int taps, float *out);
int tutti_resample_uses_avx(void);

#endif
