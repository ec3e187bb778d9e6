#include "CTuttiDSP.h"

// Never contract a * b + c into a fused multiply-add: its rounding differs, and results must
// be the same bits on every machine (and as the Swift reference path computed them).
#pragma clang fp contract(off)

#if defined(__x86_64__)
#include <immintrin.h>

// Lanes 0–3 in `low`, 4–7 in `high`: (l0 + h0 + l2 + h2) + (l1 + h1 + l3 + h3), summed as the
// tree half[i] = a[i] + a[i + 4]; quarter[i] = half[i] + half[i + 2]; quarter[0] + quarter[1].
static inline float sum_tree(__m128 low, __m128 high) {
    __m128 half = _mm_add_ps(low, high);
    __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)));
}

static float mono_sse(const float *row, const float *difference, float weight, const float *window, int taps) {
    const __m128 w = _mm_set1_ps(weight);
    __m128 sum0 = _mm_setzero_ps(), sum1 = _mm_setzero_ps();
    int j = 0;
    for (; j + 8 <= taps; j += 8) {
        __m128 c0 = _mm_add_ps(_mm_loadu_ps(row + j), _mm_mul_ps(w, _mm_loadu_ps(difference + j)));
        __m128 c1 = _mm_add_ps(_mm_loadu_ps(row + j + 4), _mm_mul_ps(w, _mm_loadu_ps(difference + j + 4)));
        sum0 = _mm_add_ps(sum0, _mm_mul_ps(c0, _mm_loadu_ps(window + j)));
        sum1 = _mm_add_ps(sum1, _mm_mul_ps(c1, _mm_loadu_ps(window + j + 4)));
    }
    float tail = 0;
    for (; j < taps; j++) tail += (row[j] + weight * difference[j]) * window[j];
    return sum_tree(sum0, sum1) + tail;
}

static void stereo_sse(const float *row, const float *difference, float weight, const float *left, const float *right,
                       int taps, float *out) {
    const __m128 w = _mm_set1_ps(weight);
    __m128 left0 = _mm_setzero_ps(), left1 = _mm_setzero_ps(), right0 = _mm_setzero_ps(), right1 = _mm_setzero_ps();
    int j = 0;
    for (; j + 8 <= taps; j += 8) {
        __m128 c0 = _mm_add_ps(_mm_loadu_ps(row + j), _mm_mul_ps(w, _mm_loadu_ps(difference + j)));
        __m128 c1 = _mm_add_ps(_mm_loadu_ps(row + j + 4), _mm_mul_ps(w, _mm_loadu_ps(difference + j + 4)));
        left0 = _mm_add_ps(left0, _mm_mul_ps(c0, _mm_loadu_ps(left + j)));
        left1 = _mm_add_ps(left1, _mm_mul_ps(c1, _mm_loadu_ps(left + j + 4)));
        right0 = _mm_add_ps(right0, _mm_mul_ps(c0, _mm_loadu_ps(right + j)));
        right1 = _mm_add_ps(right1, _mm_mul_ps(c1, _mm_loadu_ps(right + j + 4)));
    }
    float tailLeft = 0, tailRight = 0;
    for (; j < taps; j++) {
        float c = row[j] + weight * difference[j];
        tailLeft += c * left[j];
        tailRight += c * right[j];
    }
    out[0] = sum_tree(left0, left1) + tailLeft;
    out[1] = sum_tree(right0, right1) + tailRight;
}

__attribute__((target("avx")))
static float mono_avx(const float *row, const float *difference, float weight, const float *window, int taps) {
    const __m256 w = _mm256_set1_ps(weight);
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= taps; j += 8) {
        __m256 c = _mm256_add_ps(_mm256_loadu_ps(row + j), _mm256_mul_ps(w, _mm256_loadu_ps(difference + j)));
        sum = _mm256_add_ps(sum, _mm256_mul_ps(c, _mm256_loadu_ps(window + j)));
    }
    float tail = 0;
    for (; j < taps; j++) tail += (row[j] + weight * difference[j]) * window[j];
    return sum_tree(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1)) + tail;
}

__attribute__((target("avx")))
static void stereo_avx(const float *row, const float *difference, float weight, const float *left, const float *right,
                       int taps, float *out) {
    const __m256 w = _mm256_set1_ps(weight);
    __m256 sumLeft = _mm256_setzero_ps(), sumRight = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= taps; j += 8) {
        __m256 c = _mm256_add_ps(_mm256_loadu_ps(row + j), _mm256_mul_ps(w, _mm256_loadu_ps(difference + j)));
        sumLeft = _mm256_add_ps(sumLeft, _mm256_mul_ps(c, _mm256_loadu_ps(left + j)));
        sumRight = _mm256_add_ps(sumRight, _mm256_mul_ps(c, _mm256_loadu_ps(right + j)));
    }
    float tailLeft = 0, tailRight = 0;
    for (; j < taps; j++) {
        float c = row[j] + weight * difference[j];
        tailLeft += c * left[j];
        tailRight += c * right[j];
    }
    out[0] = sum_tree(_mm256_castps256_ps128(sumLeft), _mm256_extractf128_ps(sumLeft, 1)) + tailLeft;
    out[1] = sum_tree(_mm256_castps256_ps128(sumRight), _mm256_extractf128_ps(sumRight, 1)) + tailRight;
}

static float (*mono_kernel)(const float *, const float *, float, const float *, int) = mono_sse;
static void (*stereo_kernel)(const float *, const float *, float, const float *, const float *, int, float *) = stereo_sse;

// Chosen once, before any Swift code runs, so the real-time thread only loads a pointer.
__attribute__((constructor))
static void choose_kernels(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx")) {
        mono_kernel = mono_avx;
        stereo_kernel = stereo_avx;
    }
}

float tutti_resample_frame_mono(const float *row, const float *difference, float weight, const float *window, int taps) {
    return mono_kernel(row, difference, weight, window, taps);
}

void tutti_resample_frame_stereo(const float *row, const float *difference, float weight, const float *left, const float *right,
                                 int taps, float *out) {
    stereo_kernel(row, difference, weight, left, right, taps, out);
}

float tutti_resample_frame_mono_baseline(const float *row, const float *difference, float weight, const float *window, int taps) {
    return mono_sse(row, difference, weight, window, taps);
}

void tutti_resample_frame_stereo_baseline(const float *row, const float *difference, float weight, const float *left,
                                          const float *right, int taps, float *out) {
    stereo_sse(row, difference, weight, left, right, taps, out);
}

int tutti_resample_uses_avx(void) { return mono_kernel == mono_avx; }

#else

// Other architectures: the same operations and summation tree in portable C, which the
// compiler vectorizes for the unit it has (NEON on a Raspberry Pi).
static float sum_tree8(const float *a) {
    float half[4], quarter[2];
    for (int i = 0; i < 4; i++) half[i] = a[i] + a[i + 4];
    for (int i = 0; i < 2; i++) quarter[i] = half[i] + half[i + 2];
    return quarter[0] + quarter[1];
}

float tutti_resample_frame_mono(const float *row, const float *difference, float weight, const float *window, int taps) {
    float sum[8] = {0};
    int j = 0;
    for (; j + 8 <= taps; j += 8)
        for (int lane = 0; lane < 8; lane++) sum[lane] += (row[j + lane] + weight * difference[j + lane]) * window[j + lane];
    float tail = 0;
    for (; j < taps; j++) tail += (row[j] + weight * difference[j]) * window[j];
    return sum_tree8(sum) + tail;
}

void tutti_resample_frame_stereo(const float *row, const float *difference, float weight, const float *left, const float *right,
                                 int taps, float *out) {
    float sumLeft[8] = {0}, sumRight[8] = {0};
    int j = 0;
    for (; j + 8 <= taps; j += 8)
        for (int lane = 0; lane < 8; lane++) {
            float c = row[j + lane] + weight * difference[j + lane];
            sumLeft[lane] += c * left[j + lane];
            sumRight[lane] += c * right[j + lane];
        }
    float tailLeft = 0, tailRight = 0;
    for (; j < taps; j++) {
        float c = row[j] + weight * difference[j];
        tailLeft += c * left[j];
        tailRight += c * right[j];
    }
    out[0] = sum_tree8(sumLeft) + tailLeft;
    out[1] = sum_tree8(sumRight) + tailRight;
}

float tutti_resample_frame_mono_baseline(const float *row, const float *difference, float weight, const float *window, int taps) {
    return tutti_resample_frame_mono(row, difference, weight, window, taps);
}

void tutti_resample_frame_stereo_baseline(const float *row, const float *difference, float weight, const float *left,
                                          const float *right, int taps, float *out) {
    tutti_resample_frame_stereo(row, difference, weight, left, right, taps, out);
}

int tutti_resample_uses_avx(void) { return 0; }

#endif
