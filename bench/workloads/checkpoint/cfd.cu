// cp_cfd: a finite-volume solver of the 2-D compressible Euler equations (GPM ASPLOS'22 §6 uses
// Rodinia's CFD solver) on a generated mesh: a periodic grid whose cell widths are stretched
// smoothly, with a Rusanov (local Lax-Friedrichs) flux and forward-Euler steps. The state is the
// conserved variables (density, momentum, energy), changing every iteration; the mesh (cell
// widths) is read-only. Total mass is conserved exactly up to rounding: a check that the
// solver is real.
#include <cmath>
#include <memory>

#include <gpm/platform/kernel.cuh>

#include "app.hpp"
#include "kernels_common.hpp"
#include "resources.hpp"

namespace gpmbench {

namespace {

using namespace cp_apps;

constexpr float kGamma = 1.4f;

__global__ void make_mesh(float* width, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n))
    width[i] = (1.0f + 0.5f * sinf(6.2831853f * static_cast<float>(i) / static_cast<float>(n))) /
               static_cast<float>(n);
}

// A dense, slow blob in a uniform flow.
__global__ void init_flow(float4* u, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n * n)) {
    const float x = static_cast<float>(i % n) / n - 0.5f, y = static_cast<float>(i / n) / n - 0.5f;
    const float rho = 1 + (x * x + y * y < 0.02f ? 1.0f : 0.0f);
    const float vx = 0.5f, vy = 0.25f, p = 1;
    u[i] =
        make_float4(rho, rho * vx, rho * vy, p / (kGamma - 1) + 0.5f * rho * (vx * vx + vy * vy));
  }
}

__device__ __host__ inline float pressure(float4 u) {
  return (kGamma - 1) * (u.w - 0.5f * (u.y * u.y + u.z * u.z) / u.x);
}

// The Rusanov flux across a face with unit normal along x (dir 0) or y (dir 1).
__device__ __host__ inline float4 face_flux(float4 l, float4 r, int dir) {
  const float pl = pressure(l), pr = pressure(r);
  const float ul = (dir == 0 ? l.y : l.z) / l.x, ur = (dir == 0 ? r.y : r.z) / r.x;
  const float speed =
      fmaxf(fabsf(ul) + sqrtf(kGamma * pl / l.x), fabsf(ur) + sqrtf(kGamma * pr / r.x));
  const float4 fl = make_float4(l.x * ul, l.y * ul + (dir == 0 ? pl : 0),
                                l.z * ul + (dir == 1 ? pl : 0), (l.w + pl) * ul);
  const float4 fr = make_float4(r.x * ur, r.y * ur + (dir == 0 ? pr : 0),
                                r.z * ur + (dir == 1 ? pr : 0), (r.w + pr) * ur);
  return make_float4(0.5f * (fl.x + fr.x) - 0.5f * speed * (r.x - l.x),
                     0.5f * (fl.y + fr.y) - 0.5f * speed * (r.y - l.y),
                     0.5f * (fl.z + fr.z) - 0.5f * speed * (r.z - l.z),
                     0.5f * (fl.w + fr.w) - 0.5f * speed * (r.w - l.w));
}

__global__ void euler_step(const float4* u, const float* width, float4* next, std::uint64_t n,
                           float dt) {
  for (std::uint64_t i : gpm::grid_stride(n * n)) {
    const std::uint64_t r = i / n, c = i % n;
    const float4 mid = u[i];
    const float4 west = u[r * n + (c + n - 1) % n], east = u[r * n + (c + 1) % n];
    const float4 south = u[((r + n - 1) % n) * n + c], north = u[((r + 1) % n) * n + c];
    const float4 fw = face_flux(west, mid, 0), fe = face_flux(mid, east, 0);
    const float4 fs = face_flux(south, mid, 1), fn = face_flux(mid, north, 1);
    const float ax = dt / width[c], ay = dt / width[r];
    next[i] = make_float4(mid.x - ax * (fe.x - fw.x) - ay * (fn.x - fs.x),
                          mid.y - ax * (fe.y - fw.y) - ay * (fn.y - fs.y),
                          mid.z - ax * (fe.z - fw.z) - ay * (fn.z - fs.z),
                          mid.w - ax * (fe.w - fw.w) - ay * (fn.w - fs.w));
  }
}

class cfd_app final : public iterative_app {
 public:
  explicit cfd_app(std::uint64_t n) : n_(n), u_(n * n), next_(n * n), width_(n) {
    gpm::launch(make_mesh, blocks_for(n), kThreads, 0, nullptr, width_.data(), n);
    gpm::launch(init_flow, blocks_for(n * n), kThreads, 0, nullptr, u_.data(), n);
    gpm::check_cuda(cudaDeviceSynchronize(), "cfd init");
    initial_mass_ = mass();
  }
  std::vector<app_chunk> chunks() override {
    return {{"conserved", u_.data(), u_.bytes(), chunk_change::every_iteration},
            {"mesh", width_.data(), width_.bytes(), chunk_change::never}};
  }
  void iterate(std::uint64_t, cudaStream_t s, const std::function<void()>& early_done) override {
    early_done();
    // CFL: the smallest cell is 0.5 / n wide, the fastest wave about 2.
    const float dt = 0.1f * 0.5f / static_cast<float>(n_) / 2.0f;
    gpm::launch(euler_step, blocks_for(n_ * n_), kThreads, 0, s, u_.data(), width_.data(),
                next_.data(), n_, dt);
    gpm::check_cuda(
        cudaMemcpyAsync(u_.data(), next_.data(), u_.bytes(), cudaMemcpyDeviceToDevice, s),
        "cudaMemcpyAsync (cfd)");
  }
  named_counts sizes() const override { return {{"grid_side", n_}}; }
  named_values figures() override {
    const double m = mass();
    const double drift = std::fabs(m / initial_mass_ - 1);
    if (!(drift < 1e-3)) check_failed("cp_cfd: mass drifted by " + std::to_string(drift));
    return {{"mass_drift", drift}};
  }

 private:
  // Sum of density x cell area, on the host.
  double mass() const {
    std::vector<float4> u(n_ * n_);
    std::vector<float> w(n_);
    u_.copy_to_host(u.data(), u.size());
    width_.copy_to_host(w.data(), w.size());
    double m = 0;
    for (std::uint64_t i = 0; i < u.size(); ++i) m += double{u[i].x} * w[i % n_] * w[i / n_];
    return m;
  }

  std::uint64_t n_;
  gpm::device_buffer<float4> u_, next_;
  gpm::device_buffer<float> width_;
  double initial_mass_ = 0;
};

}  // namespace

std::unique_ptr<iterative_app> make_cfd_app(const mode_context& ctx) {
  // 8K x 8K cells of 16 bytes: 1 GiB of state on a GPU.
  const std::uint64_t n = scale_of(ctx) == app_scale::gpu        ? 8192
                          : scale_of(ctx) == app_scale::emulator ? 256
                                                                 : 32;
  return std::make_unique<cfd_app>(n);
}

}  // namespace gpmbench
