"""The C++ prelude every generated kernel file starts with: small inline helpers only
(no ATen, no <iostream>), so a kernel file compiles in a fraction of a second."""

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>

static inline float ind_f16_to_f32(uint16_t h) {
  _Float16 v; std::memcpy(&v, &h, 2); return (float)v;
}
static inline uint16_t ind_f32_to_f16(float f) {
  _Float16 v = (_Float16)f; uint16_t h; std::memcpy(&h, &v, 2); return h;
}
static inline float ind_bf16_to_f32(uint16_t h) {
  uint32_t u = ((uint32_t)h) << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline uint16_t ind_f32_to_bf16(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline int64_t ind_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t ind_mod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
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
template <class T> static inline T ind_sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <class T> static inline T ind_sign(T x) {
  return x != x ? x : (T)((T(0) < x) - (x < T(0)));
}
template <class T> static inline T ind_remainder(T a, T b) {
  T r = std::fmod(a, b); return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
static inline int64_t ind_remainder(int64_t a, int64_t b) { return ind_mod(a, b); }
static inline int32_t ind_remainder(int32_t a, int32_t b) { return (int32_t)ind_mod(a, b); }
template <class T> static inline T ind_fmod(T a, T b) { return std::fmod(a, b); }
static inline int64_t ind_fmod(int64_t a, int64_t b) { return a % b; }
static inline int32_t ind_fmod(int32_t a, int32_t b) { return a % b; }
template <class T> static inline T ind_floordiv_v(T a, T b) {
  return (T)ind_floordiv((int64_t)a, (int64_t)b);
}
static inline float ind_floordiv_v(float a, float b) { return std::floor(a / b); }
static inline double ind_floordiv_v(double a, double b) { return std::floor(a / b); }
template <class T> static inline T ind_ipow(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
  T r = 1; while (exp) { if (exp & 1) r *= base; base *= base; exp >>= 1; } return r;
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
"""
