// Host SIMT emulator: CUDA's built-in vector types (dim3, uint3, int4, ...) for g++ builds.
// Layout and alignment match CUDA's vector_types.h so that structures shared between host and
// kernel code have the same size on both backends. Never include this from a CUDA build.
#pragma once

#include <cstddef>

#define GPM_EMU_VECTOR2(name, T, align) \
  struct alignas(align) name {          \
    T x, y;                             \
  };                                    \
  inline constexpr name make_##name(T x, T y) { return name{x, y}; }
#define GPM_EMU_VECTOR4(name, T, align) \
  struct alignas(align) name {          \
    T x, y, z, w;                       \
  };                                    \
  inline constexpr name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

GPM_EMU_VECTOR2(int2, int, 8)
GPM_EMU_VECTOR2(uint2, unsigned int, 8)
GPM_EMU_VECTOR2(float2, float, 8)
GPM_EMU_VECTOR2(longlong2, long long, 16)
GPM_EMU_VECTOR2(ulonglong2, unsigned long long, 16)
GPM_EMU_VECTOR2(double2, double, 16)
GPM_EMU_VECTOR4(int4, int, 16)
GPM_EMU_VECTOR4(uint4, unsigned int, 16)
GPM_EMU_VECTOR4(float4, float, 16)

#undef GPM_EMU_VECTOR2
#undef GPM_EMU_VECTOR4

struct uint3 {
  unsigned int x, y, z;
};
inline constexpr uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) {
  return uint3{x, y, z};
}

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
