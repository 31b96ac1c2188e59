// cp_hotspot: Rodinia's Hotspot (GPM ASPLOS'22 §6): the temperature of a chip on an N x N grid,
// advanced by a 5-point stencil from its power map. The temperature is the state that changes
// every iteration; the power map is read-only input, checkpointed too (as an application that
// cannot regenerate it would), so redundant-chunk elimination has something to skip.
#include <cmath>
#include <memory>

#include <gpm/platform/kernel.cuh>

#include "app.hpp"
#include "kernels_common.hpp"

namespace gpmbench {

namespace {

using namespace cp_apps;

// Rodinia's chip constants (hotspot.cu): 0.5 mm die, 16 mm per side at 16K.
constexpr float kAmbient = 80.0f;

__global__ void init_chip(float* temp, float* power, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n * n)) {
    temp[i] = 320.0f + 10.0f * uniform01(11, i);
    power[i] = 0.5f * uniform01(12, i) * uniform01(13, i / 64);  // hot blocks of cells
  }
}

__global__ void stencil(const float* temp, const float* power, float* next, std::uint64_t n,
                        float cap, float rx, float ry, float rz) {
  for (std::uint64_t i : gpm::grid_stride(n * n)) {
    const std::uint64_t r = i / n, c = i % n;
    const float t = temp[i];
    const float north = r > 0 ? temp[i - n] : t, south = r + 1 < n ? temp[i + n] : t;
    const float west = c > 0 ? temp[i - 1] : t, east = c + 1 < n ? temp[i + 1] : t;
    next[i] = t + cap * (power[i] + (north + south - 2 * t) * ry + (east + west - 2 * t) * rx +
                         (kAmbient - t) * rz);
  }
}

class hotspot_app final : public iterative_app {
 public:
  explicit hotspot_app(std::uint64_t n) : n_(n), temp_(n * n), power_(n * n), next_(n * n) {
    gpm::launch(init_chip, blocks_for(n * n), kThreads, 0, nullptr, temp_.data(), power_.data(), n);
    gpm::check_cuda(cudaDeviceSynchronize(), "hotspot init");
    // Rodinia's derivation of the step and the thermal resistances from the chip's geometry.
    const float chip = 0.016f, height = 0.0005f, cell = chip / static_cast<float>(n);
    const float cap_cell = 0.5f * 1.75e6f * height * cell * cell;
    rx_ = 1.0f / (2.0f * 100.0f * height * cell / cell);
    ry_ = rx_;
    rz_ = 1.0f / (100.0f * cell * cell / height);  // a simplified vertical resistance
    const float max_slope = 3.0e6f / (0.5f * height * 1.75e6f);
    step_ = (0.001f / max_slope) / cap_cell;
  }
  std::vector<app_chunk> chunks() override {
    return {{"temperature", temp_.data(), temp_.bytes(), chunk_change::every_iteration},
            {"power", power_.data(), power_.bytes(), chunk_change::never}};
  }
  void iterate(std::uint64_t, cudaStream_t s, const std::function<void()>& early_done) override {
    early_done();  // nothing is final before the stencil
    gpm::launch(stencil, blocks_for(n_ * n_), kThreads, 0, s, temp_.data(), power_.data(),
                next_.data(), n_, step_, rx_, ry_, 1.0f / rz_);
    gpm::check_cuda(
        cudaMemcpyAsync(temp_.data(), next_.data(), temp_.bytes(), cudaMemcpyDeviceToDevice, s),
        "cudaMemcpyAsync (hotspot)");
  }
  named_counts sizes() const override { return {{"grid_side", n_}}; }
  named_values figures() override {
    float corner = 0;
    gpm::check_cuda(cudaMemcpy(&corner, temp_.data(), 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return {{"temperature_corner", corner}};
  }

 private:
  std::uint64_t n_;
  gpm::device_buffer<float> temp_, power_, next_;
  float rx_, ry_, rz_, step_;
};

}  // namespace

std::unique_ptr<iterative_app> make_hotspot_app(const mode_context& ctx) {
  const std::uint64_t n = scale_of(ctx) == app_scale::gpu        ? 16384
                          : scale_of(ctx) == app_scale::emulator ? 512
                                                                 : 64;
  return std::make_unique<hotspot_app>(n);
}

}  // namespace gpmbench
