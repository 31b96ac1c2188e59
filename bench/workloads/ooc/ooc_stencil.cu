// gpmbench `ooc` workloads whose items read their neighbours (DRAGON SC'18 Table I):
// ooc_pathfinder (dynamic programming row after row), ooc_hotspot (4 thermal iterations through
// 2 volatile grids), ooc_srad (srad_v2: 5 volatile arrays, 10 iterations), ooc_lavamd (particles
// in a 3-D grid of boxes, forces from the 27 neighbouring boxes), and the cache-size ablation on
// hotspot (DRAGON Fig. 6, volatile data). docs/workloads/ooc.md describes them.
#include <cmath>

#include "ooc_engine.cuh"

namespace gpmbench::ooc {

namespace {

constexpr std::uint64_t kSeed = 18;
constexpr std::uint64_t kMiBytes = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

// Grid columns: rows of 1 MiB on a GPU, 1 KiB with --quick and on the emulator.
std::uint64_t grid_cols(bool small) { return small ? 256 : 256 * 1024; }
bool small_grid(std::uint64_t footprint) { return footprint < 256 * kMiBytes; }

// Rodinia's pathfinder: the cheapest path's cost from the top row to each cell of the bottom row,
// moving down one row and at most one column at a time. Row r depends on row r - 1, so each row
// is its own launch; the last two rows of costs live in the small array.
struct pathfinder : no_reduction {
  static constexpr const char* name = "ooc_pathfinder";
  static constexpr float tolerance = 0;
  struct params {
    std::uint64_t seed;
    std::uint64_t cols;
  };
  enum : int { kWall };

  static problem<pathfinder> make(std::uint64_t footprint, bool) {
    problem<pathfinder> p;
    const std::uint64_t cols = grid_cols(small_grid(footprint));
    p.params = {kSeed, cols};
    p.arrays = {{"wall", role::input, static_cast<std::uint32_t>(cols)}};
    p.items = items_for(footprint, p.arrays);
    p.small_floats = static_cast<std::uint32_t>(2 * cols);
    p.passes = {{{}, {{kWall, 0}}, {}, static_cast<std::uint32_t>(cols), true}};
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    return floorf(10.0f * unit_value(p.seed, a, e));
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params& p, const pass_args&, const Acc& acc,
                                      std::uint64_t r, std::uint32_t c, local&) {
    float* cur = acc.small + (r % 2) * p.cols;
    const float wall = acc.load(kWall, r * p.cols + c);
    if (r == 0) {
      cur[c] = wall;
      return;
    }
    const float* prev = acc.small + ((r - 1) % 2) * p.cols;
    float m = prev[c];
    if (c > 0) m = fminf(m, prev[c - 1]);
    if (c + 1 < p.cols) m = fminf(m, prev[c + 1]);
    cur[c] = wall + m;
  }
};

// Rodinia's hotspot (simplified constants): kIterations explicit steps of the heat equation on a
// chip's grid with a power map, through two volatile grids: temp -> A -> B -> A -> out.
struct hotspot : no_reduction {
  static constexpr const char* name = "ooc_hotspot";
  static constexpr float tolerance = 1e-4f;
  static constexpr int kIterations = 4;
  struct params {
    std::uint64_t seed;
    std::uint64_t cols;
    std::uint64_t rows;
  };
  enum : int { kTemp, kPower, kOut, kGridA, kGridB };

  static problem<hotspot> make(std::uint64_t footprint, bool) {
    problem<hotspot> p;
    const std::uint64_t cols = grid_cols(small_grid(footprint));
    const auto w = static_cast<std::uint32_t>(cols);
    p.arrays = {{"temperature", role::input, w},
                {"power", role::input, w},
                {"output", role::output, w},
                {"grid-a", role::scratch, w},
                {"grid-b", role::scratch, w}};
    p.items = items_for(footprint, p.arrays);
    p.params = {kSeed, cols, p.items};
    const int chain[kIterations + 1] = {kTemp, kGridA, kGridB, kGridA, kOut};
    for (int k = 0; k < kIterations; ++k) {
      p.passes.push_back(
          {{0, {chain[k], chain[k + 1]}}, {{chain[k], 1}, {kPower, 0}}, {chain[k + 1]}, w});
    }
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    const float u = unit_value(p.seed, a, e);
    return a == kTemp ? 320.0f + 20.0f * u : u;
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params& p, const pass_args& args, const Acc& acc,
                                      std::uint64_t r, std::uint32_t c, local&) {
    const int src = args.arg[0], dst = args.arg[1];
    const std::uint64_t i = r * p.cols + c;
    const float t = acc.load(src, i);
    const float n = r > 0 ? acc.load(src, i - p.cols) : t;
    const float s = r + 1 < p.rows ? acc.load(src, i + p.cols) : t;
    const float w = c > 0 ? acc.load(src, i - 1) : t;
    const float e = c + 1 < p.cols ? acc.load(src, i + 1) : t;
    const float delta = 0.2f * acc.load(kPower, i) + 0.1f * (n + s - 2 * t) +
                        0.1f * (e + w - 2 * t) + 0.01f * (80.0f - t);
    acc.store(dst, i, t + 0.5f * delta);
  }
};

// Rodinia's srad_v2: speckle-reducing anisotropic diffusion. Each of kIterations iterations
// computes the four directional derivatives and the diffusion coefficient of every pixel into 5
// volatile arrays, then updates the image in place (the first from the input image). The speckle
// scale q0sqr is taken once from the input's top-left 128 x 128 region (Rodinia recomputes it
// each iteration on the host).
struct srad : no_reduction {
  static constexpr const char* name = "ooc_srad";
  static constexpr float tolerance = 1e-3f;
  static constexpr int kIterations = 10;
  struct params {
    std::uint64_t seed;
    std::uint64_t cols;
    std::uint64_t rows;
    float q0sqr;
    float lambda;
  };
  enum : int { kImage, kResult, kNorth, kSouth, kWest, kEast, kCoefficient };
  enum : int { kDerivatives, kUpdate };

  static problem<srad> make(std::uint64_t footprint, bool quick) {
    problem<srad> p;
    const std::uint64_t cols = grid_cols(small_grid(footprint));
    const auto w = static_cast<std::uint32_t>(cols);
    p.arrays = {{"image", role::input, w},   {"result", role::output, w},
                {"north", role::scratch, w}, {"south", role::scratch, w},
                {"west", role::scratch, w},  {"east", role::scratch, w},
                {"coefficient", role::scratch, w}};
    p.items = items_for(footprint, p.arrays);
    p.params = {kSeed, cols, p.items, 0.0f, 0.5f};
    double sum = 0, sum2 = 0;
    const std::uint64_t rr = std::min<std::uint64_t>(p.items, 128), rc = std::min<std::uint64_t>(cols, 128);
    for (std::uint64_t r = 0; r < rr; ++r) {
      for (std::uint64_t c = 0; c < rc; ++c) {
        const double v = input(p.params, kImage, r * cols + c);
        sum += v;
        sum2 += v * v;
      }
    }
    const double mean = sum / static_cast<double>(rr * rc);
    const double var = sum2 / static_cast<double>(rr * rc) - mean * mean;
    p.params.q0sqr = static_cast<float>(var / (mean * mean));
    // --quick: 2 iterations, so the emulator's smoke test stays short.
    for (int k = 0; k < (quick ? 2 : kIterations); ++k) {
      const int src = k == 0 ? kImage : kResult;
      p.passes.push_back({{kDerivatives, {src}},
                          {{src, 1}},
                          {kNorth, kSouth, kWest, kEast, kCoefficient},
                          w});
      p.passes.push_back({{kUpdate, {src}},
                          {{src, 0}, {kCoefficient, 1}, {kNorth, 0}, {kSouth, 0}, {kWest, 0},
                           {kEast, 0}},
                          {kResult},
                          w});
    }
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int, std::uint64_t e) {
    const float speckle = unit_value(p.seed, kImage, e);
    const float ramp = static_cast<float>(e % p.cols) / static_cast<float>(p.cols);
    return expf(0.5f * speckle + ramp);
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params& p, const pass_args& args, const Acc& acc,
                                      std::uint64_t r, std::uint32_t c, local&) {
    const int src = args.arg[0];
    const std::uint64_t i = r * p.cols + c;
    const std::uint64_t south = r + 1 < p.rows ? i + p.cols : i;
    const std::uint64_t east = c + 1 < p.cols ? i + 1 : i;
    if (args.kind == kDerivatives) {
      const float j = acc.load(src, i);
      const float dn = acc.load(src, r > 0 ? i - p.cols : i) - j;
      const float ds = acc.load(src, south) - j;
      const float dw = acc.load(src, c > 0 ? i - 1 : i) - j;
      const float de = acc.load(src, east) - j;
      const float g2 = (dn * dn + ds * ds + dw * dw + de * de) / (j * j);
      const float l = (dn + ds + dw + de) / j;
      const float num = 0.5f * g2 - (1.0f / 16.0f) * (l * l);
      const float den = 1 + 0.25f * l;
      const float qsqr = num / (den * den);
      const float d = (qsqr - p.q0sqr) / (p.q0sqr * (1 + p.q0sqr));
      const float coefficient = fminf(fmaxf(1.0f / (1.0f + d), 0.0f), 1.0f);
      acc.store(kNorth, i, dn);
      acc.store(kSouth, i, ds);
      acc.store(kWest, i, dw);
      acc.store(kEast, i, de);
      acc.store(kCoefficient, i, coefficient);
      return;
    }
    const float cc = acc.load(kCoefficient, i);
    const float divergence = cc * acc.load(kNorth, i) + acc.load(kCoefficient, south) * acc.load(kSouth, i) +
                             cc * acc.load(kWest, i) + acc.load(kCoefficient, east) * acc.load(kEast, i);
    acc.store(kResult, i, acc.load(src, i) + 0.25f * p.lambda * divergence);
  }
};

// Rodinia's lavaMD: particles in a boxes^3 grid of boxes, kParticles (kQuickParticles with
// --quick) per box; each particle's potential and force from every particle of its own and its
// (up to) 26 neighbouring boxes. Items are boxes in z-major order, so a box's neighbours lie
// within boxes^2 + boxes + 1 items of it.
struct lavamd : no_reduction {
  static constexpr const char* name = "ooc_lavamd";
  static constexpr float tolerance = 1e-3f;
  static constexpr std::uint32_t kParticles = 16, kQuickParticles = 4;
  struct params {
    std::uint64_t seed;
    std::uint64_t boxes;  // per dimension
    std::uint32_t particles;
    float a2;
  };
  enum : int { kPosition, kCharge, kForce };

  static problem<lavamd> make(std::uint64_t footprint, bool quick) {
    problem<lavamd> p;
    const std::uint32_t n = quick ? kQuickParticles : kParticles;
    p.arrays = {{"position", role::input, 4 * n},
                {"charge", role::input, n},
                {"force", role::output, 4 * n}};
    const std::uint64_t per_box = 9 * n * sizeof(float);
    // boxes^3 must be a multiple of the alignment step: boxes a multiple of 4 does it.
    std::uint64_t b = static_cast<std::uint64_t>(std::cbrt(static_cast<double>(footprint / per_box)));
    b = std::max<std::uint64_t>(4, b / 4 * 4);
    if (quick) b = std::min<std::uint64_t>(b, 4);  // the emulator: keep the smoke test short
    p.items = b * b * b;
    p.params = {kSeed, b, n, 2.0f * 0.5f * 0.5f};
    const std::uint64_t halo = b * b + b + 1;
    p.passes = {{{}, {{kPosition, halo}, {kCharge, halo}}, {kForce}, n}};
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    return 0.1f + 0.9f * unit_value(p.seed, a, e);
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params& p, const pass_args&, const Acc& acc,
                                      std::uint64_t box, std::uint32_t k, local&) {
    const std::uint64_t b = p.boxes;
    const std::uint64_t z = box / (b * b), y = box / b % b, x = box % b;
    const std::uint64_t self = (box * p.particles + k) * 4;
    // A particle is a struct of four floats (Rodinia's FOUR_VECTOR: v, x, y, z), read whole.
    const float4 own = acc.load4(kPosition, self);
    const float av = own.x, ax = own.y, ay = own.z, az = own.w;
    float fv = 0, fx = 0, fy = 0, fz = 0;
    for (int dz = -1; dz <= 1; ++dz) {
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          if ((dz < 0 && z == 0) || (dz > 0 && z + 1 == b) || (dy < 0 && y == 0) ||
              (dy > 0 && y + 1 == b) || (dx < 0 && x == 0) || (dx > 0 && x + 1 == b)) {
            continue;
          }
          const std::uint64_t nb = ((z + dz) * b + (y + dy)) * b + (x + dx);
          for (std::uint32_t q = 0; q < p.particles; ++q) {
            const float4 other = acc.load4(kPosition, (nb * p.particles + q) * 4);
            const float bv = other.x, bx = other.y, by = other.z, bz = other.w;
            const float charge = acc.load(kCharge, nb * p.particles + q);
            const float r2 = av + bv - (ax * bx + ay * by + az * bz);
            const float vij = expf(-p.a2 * r2);
            const float fs = 2.0f * vij;
            fv += charge * vij;
            fx += charge * fs * (ax - bx);
            fy += charge * fs * (ay - by);
            fz += charge * fs * (az - bz);
          }
        }
      }
    }
    acc.store(kForce, self, fv);
    acc.store(kForce, self + 1, fx);
    acc.store(kForce, self + 2, fy);
    acc.store(kForce, self + 3, fz);
  }
};

}  // namespace

workload pathfinder_workload() {
  return family_workload<pathfinder>(
      "DRAGON pathfinder: dynamic programming down a wall grid, one row per launch", 4 * kGiB);
}
workload hotspot_workload() {
  return family_workload<hotspot>(
      "DRAGON hotspot: 4 thermal iterations on a chip grid through 2 volatile grids", 2 * kGiB);
}
workload srad_workload() {
  return family_workload<srad>(
      "DRAGON srad_v2: 10 diffusion iterations, 5 volatile arrays, image updated in place",
      512 * kMiBytes);
}
workload lavamd_workload() {
  return family_workload<lavamd>(
      "DRAGON lavaMD: particle forces from the 27 neighbouring boxes of a 3-D grid",
      128 * kMiBytes);
}
// One I/O thread of a mapping's stays free for misses and the others read ahead, one run each
// (io_service::read_ahead_one): more threads, more reads in flight.
workload ablation_io_threads_workload() {
  return ablation_workload<pathfinder>("ooc_ablation_io_threads",
                                       "gpmkit I/O threads per mapping 2, 4 and 8 (1, 3 and 7 "
                                       "reading ahead): pathfinder out of core",
                                       4 * kGiB, {"io-threads-2", "io-threads-4", "io-threads-8"});
}
// Read-ahead reads of 16 MiB (the default), 64 MiB and 256 MiB, each with a window of one read
// (two queued ahead): on the H200 machine's virtual disk the chunked pipeline, reading a 256 MiB
// window in one pread, read pathfinder out of core at twice gpmkit's rate.
workload ablation_readahead_run_workload() {
  return ablation_workload<pathfinder>("ooc_ablation_readahead_run",
                                       "gpmkit read-ahead reads of 16, 64 and 256 MiB: pathfinder "
                                       "out of core",
                                       4 * kGiB, {"ra-run-16", "ra-run-64", "ra-run-256"});
}
// How long idle I/O threads poll before they sleep (mapping_options::idle_poll_us): lavaMD's
// kernels compute between misses, so with 200 us of polling its misses might each have waited for
// a sleeping thread; on an H200 2 ms and 20 ms changed nothing (docs/workloads/ooc.md).
workload ablation_io_poll_workload() {
  return ablation_workload<lavamd>("ooc_ablation_io_poll",
                                   "gpmkit I/O threads polling 200 us, 2 ms and 20 ms before they "
                                   "sleep: lavaMD out of core",
                                   128 * kMiBytes,
                                   {"poll-us-200", "poll-us-2000", "poll-us-20000"});
}
// Write-behind of the outputs (mapping_options::write_behind) on and off, out of core and in host
// memory: lavaMD's force array is written once, and without write-behind the lines the host cache
// holds at the end went to the disk in sync(), after the last kernel.
workload ablation_write_behind_workload() {
  return ablation_workload<lavamd>(
      "ooc_ablation_write_behind",
      "gpmkit writing dirty lines behind the kernels, on and off: lavaMD out of core and in host "
      "memory",
      128 * kMiBytes,
      {"write-behind-on", "write-behind-off", "in-host-write-behind-on",
       "in-host-write-behind-off"});
}
workload ablation_cache_workload() {
  return ablation_workload<hotspot>(
      "ooc_ablation_cache",
      "gpmkit GPU-cache and host-cache caps: hotspot out of core, 2 volatile grids (DRAGON Fig. 6)",
      kGiB, {"gpu-div32", "gpu-div16", "gpu-div8", "host-div8", "host-div4", "host-div2"});
}

}  // namespace gpmbench::ooc
