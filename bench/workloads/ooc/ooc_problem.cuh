// What a gpmbench `ooc` workload is (DRAGON's applications, SC'18 Table I): arrays of floats
// indexed by item (a row, a box, an option, an input unit), some generated into input files, some
// written to output files, some volatile (intermediate data that never reaches a file), and a
// list of passes. A pass runs one element function over every item (span threads per item),
// reading some arrays within a halo of items around the item and writing others at the item.
// The same element function runs through three accessors: plain GPU memory (whole arrays or a
// chunk's window of them), gpm::ooc::array views, and host memory (the CPU reference), so every
// mode computes exactly the same thing. This file describes problems; it moves no data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gpm/ooc/array.cuh>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>

namespace gpmbench::ooc {

inline constexpr int kMaxArrays = 8;

enum class role : std::uint8_t {
  input,     // generated into a file before the runs; read only
  output,    // a file the passes write (and may read back after writing it)
  scratch,   // volatile: intermediate data, zero at the start, never in a file
};

struct array_def {
  std::string name;
  role kind;
  std::uint32_t width;  // floats per item
};

// One array a pass reads, and how many items either side of the item it reads.
struct array_read {
  int array;
  std::uint64_t halo;
};

// What the element function of a pass is told (trivially copyable, passed to kernels).
struct pass_args {
  int kind = 0;             // which computation of the workload
  int arg[4] = {0, 0, 0, 0};  // the workload's own: e.g. source and destination arrays
};

struct pass {
  pass_args args;
  std::vector<array_read> reads;
  std::vector<int> writes;  // an array written by a pass is read by it with halo 0 at most
  std::uint32_t span = 1;   // threads per item
  bool sequential = false;  // items depend on the previous item: one launch per item, in order
};

// A problem of workload W. W provides (see ooc_streaming.cu, ooc_stencil.cu):
//   name, tolerance                      its record name; the relative error its checks allow
//   params                               its sizes and constants (trivially copyable)
//   make(footprint, quick)               the problem<W> of about `footprint` bytes
//   input(params, array, element)        the generated value of an input element (host, device)
//   element(params, args, acc, item, lane, local&)   one lane of one item of a pass
//   local, finish(params, args, acc, local&)         per-thread reduction state and its end
//                                        (no_reduction: none)
template <class W>
struct problem {
  typename W::params params;
  std::uint64_t items = 0;
  std::vector<array_def> arrays;
  std::vector<pass> passes;
  std::uint32_t small_floats = 0;  // a small array every mode keeps in GPU memory (zeroed)

  std::uint64_t array_bytes(int a) const { return items * arrays[a].width * sizeof(float); }
  std::uint64_t footprint() const {
    std::uint64_t b = 0;
    for (int a = 0; a < static_cast<int>(arrays.size()); ++a) b += array_bytes(a);
    return b;
  }
};

// Items per 4 KiB-aligned step of every array (each array's bytes per item are a power-of-two
// multiple or fraction of 4 KiB): problems have a multiple of it, so every array fills whole
// 4 KiB blocks of its file and chunk boundaries can be aligned for O_DIRECT.
inline std::uint64_t alignment_items(const std::vector<array_def>& arrays) {
  std::uint64_t align = 1;
  for (const array_def& d : arrays) {
    const std::uint64_t row = d.width * sizeof(float);
    align = std::max(align, row >= 4096 ? 1 : 4096 / row);
  }
  return align;
}

// The items that make `arrays` take about `footprint` bytes (at least one aligned step).
inline std::uint64_t items_for(std::uint64_t footprint, const std::vector<array_def>& arrays) {
  std::uint64_t per_item = 0;
  for (const array_def& d : arrays) per_item += d.width * sizeof(float);
  const std::uint64_t align = alignment_items(arrays);
  return std::max<std::uint64_t>(1, footprint / per_item / align) * align;
}

// ---- accessors --------------------------------------------------------------------------
// load / store take an array and an element index (item * width + k) of the whole array; load4
// reads elements e .. e + 3 (e a multiple of 4) as one 16-byte element, as a kernel reads a
// struct of four floats (lavaMD's particles).

// GPU memory: array a holds elements [base[a], ...) at p[a] (a whole array: base 0).
struct device_arrays {
  float* p[kMaxArrays] = {};
  std::uint64_t base[kMaxArrays] = {};
  float* small = nullptr;

  __device__ float load(int a, std::uint64_t e) const { return p[a][e - base[a]]; }
  __device__ float4 load4(int a, std::uint64_t e) const {
    return *reinterpret_cast<const float4*>(p[a] + (e - base[a]));
  }
  __device__ void store(int a, std::uint64_t e, float v) const { p[a][e - base[a]] = v; }
  __device__ void add_small(std::uint32_t k, float v) const { atomicAdd(small + k, v); }
};

// gpm::ooc::array views over mappings of whole arrays. An access that fails (io_error) raises
// *error to its status and reads as 0, so the run fails its check instead of hanging.
struct ooc_arrays {
  gpm::ooc::array<float> a[kMaxArrays];
  gpm::ooc::array<float4> a4[kMaxArrays];  // the same mappings, 16 bytes an element
  float* small = nullptr;
  std::uint32_t* error = nullptr;

  __device__ float load(int k, std::uint64_t e) const {
    float v = 0;
    const gpm::ooc::status st = a[k].get(e, v);
    if (st != gpm::ooc::status::ok) atomicMax(error, static_cast<std::uint32_t>(st));
    return v;
  }
  __device__ float4 load4(int k, std::uint64_t e) const {
    float4 v{};
    const gpm::ooc::status st = a4[k].get(e / 4, v);
    if (st != gpm::ooc::status::ok) atomicMax(error, static_cast<std::uint32_t>(st));
    return v;
  }
  __device__ void store(int k, std::uint64_t e, float v) const {
    const gpm::ooc::status st = a[k].set(e, v);
    if (st != gpm::ooc::status::ok) atomicMax(error, static_cast<std::uint32_t>(st));
  }
  __device__ void add_small(std::uint32_t k, float v) const { atomicAdd(small + k, v); }
};

// Host memory, for the CPU reference (one thread).
struct host_arrays {
  float* p[kMaxArrays] = {};
  float* small = nullptr;

  // Host-device only so that the element functions' host-device templates may call them.
  GPM_HOST_DEVICE float load(int a, std::uint64_t e) const { return p[a][e]; }
  GPM_HOST_DEVICE float4 load4(int a, std::uint64_t e) const {
    return make_float4(p[a][e], p[a][e + 1], p[a][e + 2], p[a][e + 3]);
  }
  GPM_HOST_DEVICE void store(int a, std::uint64_t e, float v) const { p[a][e] = v; }
  GPM_HOST_DEVICE void add_small(std::uint32_t k, float v) const { small[k] += v; }
};

// Items [lo, hi) of a pass, span threads each: W::element for each (item, lane), then W::finish
// once per thread with what the thread accumulated (reductions).
template <class W, class Acc>
__global__ void pass_kernel(typename W::params p, pass_args args, Acc acc, std::uint64_t lo,
                            std::uint64_t hi, std::uint32_t span) {
  typename W::local l{};
  for (std::uint64_t k : gpm::grid_stride((hi - lo) * span)) {
    W::element(p, args, acc, lo + k / span, static_cast<std::uint32_t>(k % span), l);
  }
  W::finish(p, args, acc, l);
}

// Fills elements [first, first + n) of input array a of a problem with its generated values.
template <class W>
__global__ void generate_kernel(typename W::params p, int a, std::uint64_t first, std::uint64_t n,
                                float* out) {
  for (std::uint64_t i : gpm::grid_stride(n)) out[i] = W::input(p, a, first + i);
}

// A reproducible value in [0, 1) for element e of array a of the run seeded `seed`.
GPM_HOST_DEVICE inline float unit_value(std::uint64_t seed, int a, std::uint64_t e) {
  const std::uint64_t z = gpm::mix64((seed << 40) ^ (static_cast<std::uint64_t>(a) << 56) ^ e);
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// What a workload without a reduction leaves as it is: nothing kept per thread, nothing to finish.
struct no_reduction {
  struct local {};
  template <class P, class Acc>
  GPM_HOST_DEVICE static void finish(const P&, const pass_args&, const Acc&, local&) {}
};

}  // namespace gpmbench::ooc
