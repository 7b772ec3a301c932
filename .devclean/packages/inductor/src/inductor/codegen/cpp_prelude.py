"""The C++ prelude every generated kernel file starts with: small inline helpers only
(no ATen, no <iostream>), so a kernel file compiles in a fraction of a second."""

from inductor.codegen.cascade import PRELUDE_CASCADE
from inductor.codegen.checks import PRELUDE_CHECKS

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>
#include <type_traits>

/* Half types are stored as uint16_t and computed in float; bit casts (not memcpy) keep
   the conversions vectorizable. */
static inline float ind_f16_to_f32(uint16_t h) {
  return (float)__builtin_bit_cast(_Float16, h);
}
static inline uint16_t ind_f32_to_f16(float f) {
  return __builtin_bit_cast(uint16_t, (_Float16)f);
}
static inline float ind_bf16_to_f32(uint16_t h) {
  return __builtin_bit_cast(float, ((uint32_t)h) << 16);
}
static inline uint16_t ind_f32_to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)(f != f ? 0x7fc0u : rounded);
}
/* Integer division: MIN / -1 overflows (x86 traps, SIGFPE); ATen's results wrap (`//`
   gives MIN, `%` and fmod 0). A constant divisor folds the test away. */
static inline int64_t ind_floordiv(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t ind_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <class T> static inline T ind_trunc_div(T a, T b) {
  if constexpr (std::is_signed<T>::value && sizeof(T) >= sizeof(int)) {
    if (b == T(-1)) return (T)(0 - (std::make_unsigned_t<T>)a);
  }
  return (T)(a / b);
}
static inline int64_t ind_clamp(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
template <class T> static inline T ind_max(T a, T b) {
  if (a != a) return a; if (b != b) return b; return a > b ? a : b;
}
template <class T> static inline T ind_min(T a, T b) {
  if (a != a) return a; if (b != b) return b; return a < b ? a : b;
}
template <class T> static inline T ind_relu(T x) { return x < T(0) ? T(0) : x; }
/* Vectorizable float math (branch-free, inlined, so `omp simd` loops stay vectorized;
   libm calls would not vectorize without -ffast-math). Double uses libm. Kernels are built
   with -ffp-contract=off (each of eager's ops rounds its result), so these polynomials ask
   for fused multiply-adds explicitly where the CPU has them. */
#if defined(__FMA__)
#define IND_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define IND_FMA(a, b, c) ((a) * (b) + (c))
#endif
static inline float ind_exp(float x) {
  float xc = x < -86.0f ? -86.0f : (x > 88.72283f ? 88.72283f : x);
  float n = std::nearbyint(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = IND_FMA(n, 2.12194440e-4f, r);
  float r2 = r * r;
  float p = 1.9875691500E-4f;
  p = IND_FMA(p, r, 1.3981999507E-3f);
  p = IND_FMA(p, r, 8.3334519073E-3f);
  p = IND_FMA(p, r, 4.1665795894E-2f);
  p = IND_FMA(p, r, 1.6666665459E-1f);
  p = IND_FMA(p, r, 5.0000001201E-1f);
  p = IND_FMA(p, r2, r) + 1.0f;
  int32_t e = ((int32_t)n + 126) << 23;
  float y = p * __builtin_bit_cast(float, e) * 2.0f;
  y = x > 88.72283f ? __builtin_inff() : y;
  y = x < -103.97208f ? 0.0f : y;
  return x != x ? x : y;
}
static inline double ind_exp(double x) { return std::exp(x); }
/* log as Cephes' logf: mantissa in [sqrt(1/2), sqrt(2)), a degree-8 polynomial, the
   exponent times ln 2 in two parts; denormals rescaled by 2^23 first. Under 1 ulp from
   double log over every positive float (checked exhaustively in steps of 7 bit patterns). */
static inline float ind_log(float x) {
  bool tiny = x < 1.17549435e-38f;
  int32_t bits = __builtin_bit_cast(int32_t, tiny ? x * 8388608.0f : x);
  float e = (float)((bits >> 23) - (tiny ? 149 : 126));
  float m = __builtin_bit_cast(float, (bits & 0x007fffff) | 0x3f000000);
  bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = (low ? m + m : m) - 1.0f;
  float z = m * m;
  float p = 7.0376836292E-2f;
  p = IND_FMA(p, m, -1.1514610310E-1f);
  p = IND_FMA(p, m, 1.1676998740E-1f);
  p = IND_FMA(p, m, -1.2420140846E-1f);
  p = IND_FMA(p, m, 1.4249322787E-1f);
  p = IND_FMA(p, m, -1.6668057665E-1f);
  p = IND_FMA(p, m, 2.0000714765E-1f);
  p = IND_FMA(p, m, -2.4999993993E-1f);
  p = IND_FMA(p, m, 3.3333331174E-1f);
  float y = IND_FMA(e, -2.12194440e-4f, p * m * z);
  y = IND_FMA(-0.5f, z, y);
  float r = IND_FMA(e, 0.693359375f, m + y);
  r = x == __builtin_inff() ? x : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  return x != x ? x : r;
}
static inline double ind_log(double x) { return std::log(x); }
/* log1p from log with the rounding error of `1 + x` divided out (Goldberg's form): within
   2.5 ulp of double log1p over every float (checked in steps of 7 bit patterns). expm1:
   for |x| < 0.5 its Taylor polynomial to x^9 (truncation under 1e-8 relative, no
   cancellation), else exp(x) - 1 (no cancellation there either): one exp and eight FMAs
   instead of an exp, a log and a division (ELU's forward 1.57 -> 0.64 ms over 2M floats);
   within 1.8 ulp of double expm1 over every 7th float bit pattern. */
static inline float ind_log1p(float x) {
  float u = 1.0f + x;
  float d = u - 1.0f;
  float r = ind_log(u) * (x / (d == 0.0f ? 1.0f : d));
  r = d == 0.0f ? x : r;
  return u == __builtin_inff() ? u : r;
}
static inline double ind_log1p(double x) { return std::log1p(x); }
static inline float ind_expm1(float x) {
  float p = IND_FMA(2.7557319224e-6f, x, 2.4801587302e-5f);
  p = IND_FMA(p, x, 1.9841269841e-4f);
  p = IND_FMA(p, x, 1.3888888889e-3f);
  p = IND_FMA(p, x, 8.3333333333e-3f);
  p = IND_FMA(p, x, 4.1666666667e-2f);
  p = IND_FMA(p, x, 1.6666666667e-1f);
  p = IND_FMA(p, x, 0.5f);
  float small = IND_FMA(p, x * x, x);
  float r = std::fabs(x) < 0.5f ? small : ind_exp(x) - 1.0f;
  return x == 0.0f ? x : r; /* NOTE: -0.0 stays -0.0 */
}
static inline double ind_expm1(double x) { return std::expm1(x); }
static inline float ind_tanh(float x) {
  float ax = std::fabs(x);
  float e = ind_exp(2.0f * ax);
  float big = 1.0f - 2.0f / (e + 1.0f);
  float z = x * x;
  float s = IND_FMA(-5.70498872745E-3f, z, 2.06390887954E-2f);
  s = IND_FMA(s, z, -5.37397155531E-2f);
  s = IND_FMA(s, z, 1.33314422036E-1f);
  s = IND_FMA(s, z, -3.33332819422E-1f);
  s = IND_FMA(s * z, ax, ax);
  float r = ax < 0.625f ? s : big;
  return std::copysign(r, x);
}
static inline double ind_tanh(double x) { return std::tanh(x); }
/* erf as x * P(x^2) / Q(x^2) on [-4, 4] (saturated outside): no exp, one division;
   relative error under 5e-7 against double erf (checked on a dense grid). */
static inline float ind_erf(float x) {
  float xc = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  float z = xc * xc;
  float p = -2.72614225801306e-10f;
  p = IND_FMA(p, z, 2.77068142495902e-08f);
  p = IND_FMA(p, z, -2.10102402082508e-06f);
  p = IND_FMA(p, z, -5.69250639462346e-05f);
  p = IND_FMA(p, z, -7.34990630326855e-04f);
  p = IND_FMA(p, z, -2.95459980854025e-03f);
  p = IND_FMA(p, z, -1.60960333262415e-02f);
  float q = -1.45660718464996e-05f;
  q = IND_FMA(q, z, -2.13374055278905e-04f);
  q = IND_FMA(q, z, -1.68282697438203e-03f);
  q = IND_FMA(q, z, -7.37332916720468e-03f);
  q = IND_FMA(q, z, -1.42647390514189e-02f);
  return xc * p / q;
}
static inline double ind_erf(double x) { return std::erf(x); }
template <class T> static inline T ind_sigmoid(T x) { return T(1) / (T(1) + ind_exp(-x)); }
template <class T> static inline T ind_sign(T x) {
  return (T)((T(0) < x) - (x < T(0)));  // NOTE: eager's: NaN -> 0
}
template <class T> static inline T ind_remainder(T a, T b) {
  T r = std::fmod(a, b); return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
static inline int64_t ind_remainder(int64_t a, int64_t b) { return ind_mod(a, b); }
static inline int32_t ind_remainder(int32_t a, int32_t b) { return (int32_t)ind_mod(a, b); }
template <class T> static inline T ind_fmod(T a, T b) { return std::fmod(a, b); }
static inline int64_t ind_fmod(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
static inline int32_t ind_fmod(int32_t a, int32_t b) { return b == -1 ? 0 : a % b; }
template <class T> static inline T ind_floordiv_v(T a, T b) {
  return (T)ind_floordiv((int64_t)a, (int64_t)b);
}
static inline float ind_floordiv_v(float a, float b) { return std::floor(a / b); }
static inline double ind_floordiv_v(double a, double b) { return std::floor(a / b); }
template <class T> static inline T ind_ipow(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
  T r = 1; while (exp) { if (exp & 1) r *= base; base *= base; exp >>= 1; } return r;
}
/* Shifts as ATen defines them for counts out of [0, bits): C++ leaves them undefined
   (x86 masks the count: 1 << 70 gave 64). */
template <class T> static inline T ind_lshift(T a, T b) {
  constexpr int64_t bits = sizeof(T) * 8;
  if ((int64_t)(std::make_signed_t<T>)b < 0 || (int64_t)b >= bits) return T(0);
  return (T)((std::make_unsigned_t<T>)a << b);
}
template <class T> static inline T ind_rshift(T a, T b) {
  constexpr int64_t bits = sizeof(T) * 8 - (std::is_signed<T>::value ? 1 : 0);
  if ((int64_t)(std::make_signed_t<T>)b < 0 || (int64_t)b >= bits) return (T)(a >> bits);
  return (T)(a >> b);
}
static inline float ind_pow(float a, float b) { return std::pow(a, b); }
static inline double ind_pow(double a, double b) { return std::pow(a, b); }
static inline int64_t ind_pow(int64_t a, int64_t b) { return ind_ipow(a, b); }
static inline int32_t ind_pow(int32_t a, int32_t b) { return ind_ipow(a, b); }

/* Counter-based RNG (splitmix64 over seed and element offset): stateless, so every
   element's draw is independent of the thread and loop order. */
static inline uint64_t ind_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static inline float ind_rand(int64_t seed, int64_t offset) {
  uint64_t z = ind_mix64(((uint64_t)seed) * 0x632be59bd9b4e019ULL + (uint64_t)offset);
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}
static inline float ind_randn(int64_t seed, int64_t offset) {
  uint64_t z = ind_mix64(((uint64_t)seed) * 0x632be59bd9b4e019ULL + (uint64_t)offset);
  double u1 = ((double)(z >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  uint64_t z2 = ind_mix64(z ^ 0xd1b54a32d192ed03ULL);
  double u2 = (double)(z2 >> 11) * (1.0 / 9007199254740992.0);
  return (float)(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}
""" + PRELUDE_CHECKS + PRELUDE_CASCADE
