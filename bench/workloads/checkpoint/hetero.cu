// cp_hetero: the HeteroCheckpoint-style application (DSN'14, Fig. 2): four chunks that change in
// four ways. "mesh" is read-only input; "coefficients" are computed by the iteration's first
// kernel and then stay fixed (pre-copied from there); "field" is rewritten by the last kernel;
// "statistics" change every fourth iteration only. Pre-copy and redundant-chunk elimination
// each have something to save here, which is the point of the workload.
#include <cmath>
#include <memory>

#include <gpm/platform/kernel.cuh>

#include "app.hpp"
#include "kernels_common.hpp"

namespace gpmbench {

namespace {

using namespace cp_apps;

__global__ void init_mesh(float* mesh, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n))
    mesh[i] = 1 + uniform01(1, i);
}
__global__ void compute_coefficients(const float* mesh, float* coef, std::uint64_t n,
                                     std::uint64_t it) {
  for (std::uint64_t i : gpm::grid_stride(n))
    coef[i] = mesh[(i * 3) % n] * (0.5f + 0.01f * static_cast<float>(it % 17)) / (1 + mesh[i]);
}
// Several sweeps: the iteration's compute phase, during which the coefficients' copy runs.
__global__ void relax_field(float* field, const float* coef, std::uint64_t n, int sweeps) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    float f = field[i];
    for (int k = 0; k < sweeps; ++k) f = 0.9f * f + 0.1f * coef[i % n] * sinf(f + k);
    field[i] = f;
  }
}
__global__ void update_statistics(const float* field, float* stats, std::uint64_t m,
                                  std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(m))
    stats[i] = 0.5f * stats[i] + field[(i * 131) % n];
}

class hetero_app final : public iterative_app {
 public:
  explicit hetero_app(std::uint64_t n)
      : n_(n), mesh_(n), coef_(n / 2), field_(n / 2), stats_(n / 8) {
    gpm::launch(init_mesh, blocks_for(n_), kThreads, 0, nullptr, mesh_.data(), n_);
    coef_.fill_bytes(0);
    field_.fill_bytes(0);
    stats_.fill_bytes(0);
    gpm::check_cuda(cudaDeviceSynchronize(), "hetero init");
  }
  std::vector<app_chunk> chunks() override {
    return {{"mesh", mesh_.data(), mesh_.bytes(), chunk_change::never},
            {"coefficients", coef_.data(), coef_.bytes(), chunk_change::early},
            {"field", field_.data(), field_.bytes(), chunk_change::every_iteration},
            {"statistics", stats_.data(), stats_.bytes(), chunk_change::sometimes}};
  }
  void iterate(std::uint64_t it, cudaStream_t s, const std::function<void()>& early_done) override {
    const std::uint64_t half = n_ / 2;
    gpm::launch(compute_coefficients, blocks_for(half), kThreads, 0, s, mesh_.data(), coef_.data(),
                half, it);
    early_done();
    gpm::launch(relax_field, blocks_for(half), kThreads, 0, s, field_.data(), coef_.data(), half,
                16);
    if (it % 4 == 3) {
      gpm::launch(update_statistics, blocks_for(n_ / 8), kThreads, 0, s, field_.data(),
                  stats_.data(), n_ / 8, half);
    }
  }
  named_counts sizes() const override { return {{"mesh_floats", n_}}; }

 private:
  std::uint64_t n_;
  gpm::device_buffer<float> mesh_, coef_, field_, stats_;
};

}  // namespace

std::unique_ptr<iterative_app> make_hetero_app(const mode_context& ctx) {
  // State bytes = 4 n * (1 + 1/2 + 1/2 + 1/8): about 1.1 GiB on a GPU.
  const std::uint64_t n = scale_of(ctx) == app_scale::gpu        ? (1ull << 28)
                          : scale_of(ctx) == app_scale::emulator ? (1ull << 19)
                                                                 : (1ull << 14);
  return std::make_unique<hetero_app>(n);
}

}  // namespace gpmbench
