// cp_blackscholes: Black-Scholes pricing of European options (GPM ASPLOS'22 §6) made iterative:
// each iteration the market moves (the spot prices, final after the first kernel: pre-copied),
// then every option's call and put are priced again. Strikes and maturities are read-only.
#include <cmath>
#include <memory>

#include <gpm/platform/kernel.cuh>

#include "app.hpp"
#include "kernels_common.hpp"
#include "resources.hpp"

namespace gpmbench {

namespace {

using namespace cp_apps;

__global__ void init_options(float* spot, float* strike, float* years, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    spot[i] = 5 + 25 * uniform01(21, i);
    strike[i] = 1 + 99 * uniform01(22, i);
    years[i] = 0.25f + 9.75f * uniform01(23, i);
  }
}

__global__ void move_market(float* spot, std::uint64_t n, std::uint64_t it) {
  for (std::uint64_t i : gpm::grid_stride(n))
    spot[i] *= 1 + 0.02f * (uniform01(24 + it, i) - 0.5f);
}

__device__ __host__ inline float cnd(float d) { return 0.5f * erfcf(-d * 0.70710678f); }

__global__ void price(const float* spot, const float* strike, const float* years, float* call,
                      float* put, std::uint64_t n, float rate, float volatility) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    const float s = spot[i], k = strike[i], t = years[i];
    const float sqrt_t = sqrtf(t);
    const float d1 =
        (logf(s / k) + (rate + 0.5f * volatility * volatility) * t) / (volatility * sqrt_t);
    const float d2 = d1 - volatility * sqrt_t;
    const float discounted = k * expf(-rate * t);
    call[i] = s * cnd(d1) - discounted * cnd(d2);
    put[i] = discounted * (1 - cnd(d2)) - s * (1 - cnd(d1));
  }
}

class blackscholes_app final : public iterative_app {
 public:
  explicit blackscholes_app(std::uint64_t n)
      : n_(n), spot_(n), strike_(n), years_(n), call_(n), put_(n) {
    gpm::launch(init_options, blocks_for(n), kThreads, 0, nullptr, spot_.data(), strike_.data(),
                years_.data(), n);
    gpm::check_cuda(cudaDeviceSynchronize(), "blackscholes init");
  }
  std::vector<app_chunk> chunks() override {
    return {{"spot", spot_.data(), spot_.bytes(), chunk_change::early},
            {"strike", strike_.data(), strike_.bytes(), chunk_change::never},
            {"years", years_.data(), years_.bytes(), chunk_change::never},
            {"call", call_.data(), call_.bytes(), chunk_change::every_iteration},
            {"put", put_.data(), put_.bytes(), chunk_change::every_iteration}};
  }
  void iterate(std::uint64_t it, cudaStream_t s, const std::function<void()>& early_done) override {
    gpm::launch(move_market, blocks_for(n_), kThreads, 0, s, spot_.data(), n_, it);
    early_done();
    gpm::launch(price, blocks_for(n_), kThreads, 0, s, spot_.data(), strike_.data(), years_.data(),
                call_.data(), put_.data(), n_, 0.02f, 0.30f);
  }
  named_counts sizes() const override { return {{"options", n_}}; }
  named_values figures() override {
    float c = 0;
    gpm::check_cuda(cudaMemcpy(&c, call_.data(), 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (!std::isfinite(c)) check_failed("cp_blackscholes: a price is not finite");
    return {{"call_0", c}};
  }

 private:
  std::uint64_t n_;
  gpm::device_buffer<float> spot_, strike_, years_, call_, put_;
};

}  // namespace

std::unique_ptr<iterative_app> make_blackscholes_app(const mode_context& ctx) {
  // 128 M options (2.5 GiB of state) on a GPU.
  const std::uint64_t n = scale_of(ctx) == app_scale::gpu        ? (128ull << 20)
                          : scale_of(ctx) == app_scale::emulator ? (256ull << 10)
                                                                 : (16ull << 10);
  return std::make_unique<blackscholes_app>(n);
}

}  // namespace gpmbench
