// The native-persistence workloads of the GPM paper (§4.3, §5.4): BFS, SRAD and prefix sum,
// whose kernels persist their own results into a pool so that a run interrupted by a crash
// resumes where its durable progress ends instead of restarting.
//
//   run_bfs / run_srad / run_prefix_sum   one run (config.how: gpm by default) on a pool file:
//   resume = false
//       creates the pool (failing if it exists) and starts; resume = true opens it, validates the
//       run's header against the configuration and continues from the published progress
//       (a finished run returns at once). Durability: process crash (the pool's level).
//   *_workload()                          the gpmbench workloads (modes gpm, gpm-ndp, cap-mm,
//                                         cap-fs, cpu, against the d2h_memcpy ceiling)
//
// Sizes default to small problems; the gpmbench workloads size them per backend.
//
// The persist sites of the gpm way (gpm::persist_at; docs/crash-checking.md names the test that
// catches each one's removal, tests/workloads/native_crash_image_test.cu):
//   native.store.header            a new run's header (native_store.cpp)
//   native.bfs.init, native.bfs.level      each thread's costs and mask bits (fences: a thread's
//                                          stores are scattered over the arrays)
//   native.srad.init, native.srad.coefficient, native.srad.image   each thread's pixels (fences)
//   native.prefix_sum.value, native.prefix_sum.last_value, native.prefix_sum.record
//                                  a subarray's sums, its last sum, then its record (ranged)
//   native.bfs.publish, native.srad.publish, native.prefix_sum.publish
//                                  the progress word the grid's last block publishes
#pragma once

#include <cstdint>
#include <string>

#include <gpm/pool/pool.hpp>

#include "gpmbench/workload.hpp"
#include "native_store.hpp"

namespace gpmbench::native {

struct bfs_config {
  std::uint64_t width = 64;  // generated road grid (ignored with gr_path)
  std::uint64_t height = 64;
  std::uint64_t extra_roads = 256;  // short two-way roads added at random
  std::uint64_t seed = 1;
  std::string gr_path;  // a DIMACS .gr file to search instead of the generated grid
  std::uint64_t source = 0;
  geometry geo{0, 0};  // kernel geometry; 0 blocks: fill the GPU
  way how = way::gpm;  // gpm, gpm_ndp, cap_mm or cpu (not part of the problem: a run may resume
                       // another way)
};
// Steps: BFS levels. The output: every node's hop count from the source (the cost array).
run_summary run_bfs(const std::string& pool_path, const gpm::pool_options& options,
                    const bfs_config& config, bool resume, const progress_fn& progress = {});

struct srad_config {
  std::uint64_t rows = 256;  // the generated speckled image
  std::uint64_t cols = 128;
  std::uint64_t iterations = 8;
  double lambda = 0.5;
  std::uint64_t seed = 1;
  geometry geo{0, 0};
  way how = way::gpm;
};
// Steps: diffusion iterations. The output: the image after the last iteration.
run_summary run_srad(const std::string& pool_path, const gpm::pool_options& options,
                     const srad_config& config, bool resume, const progress_fn& progress = {});

struct prefix_sum_config {
  std::uint64_t arrays = 4;           // independent arrays, each scanned on its own
  std::uint64_t elements = 1u << 14;  // integers per array (a multiple of kScanBlock)
  std::uint64_t seed = 1;
  geometry geo{0, 0};
  way how = way::gpm;
};
inline constexpr unsigned kScanBlock = 256;  // elements (and threads) of one block's subarray
// Steps: subarrays whose partial sums, then final sums, are durable (2 per subarray). The
// output: the inclusive prefix sums of every array (32-bit, wrapping).
run_summary run_prefix_sum(const std::string& pool_path, const gpm::pool_options& options,
                           const prefix_sum_config& config, bool resume,
                           const progress_fn& progress = {});

workload bfs_workload();
workload srad_workload();
workload prefix_sum_workload();

}  // namespace gpmbench::native
