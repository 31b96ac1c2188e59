// gpmbench workload `srad` and run_srad: speckle-reducing anisotropic diffusion (Rodinia's SRAD,
// the GPM paper's Table 1) on a generated speckled image. Each iteration computes the diffusion
// coefficient matrix from image J[k % 2] and the next image J[(k + 1) % 2] from both; the
// kernels store the coefficients and the new image into the pool and persist them, and the
// grid's last block publishes the iteration count. The image the iteration reads is never
// written by it, so an iteration interrupted by a crash is simply run again on resume.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/publish.cuh>

#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "native.hpp"
#include "native_kernels.cuh"
#include "native_mode.hpp"

namespace gpmbench::native {

namespace {

enum srad_array : int { kImage0, kImage1, kCoefficient };
constexpr std::uint64_t kRoiSide = 128;  // Rodinia's region of interest: the top-left corner
constexpr unsigned kStatsThreads = 256;

std::vector<array_spec> srad_arrays(std::uint64_t pixels) {
  return {{"image0", pixels * sizeof(float)},
          {"image1", pixels * sizeof(float)},
          {"coefficient", pixels * sizeof(float)}};
}

std::vector<std::uint64_t> srad_params(const srad_config& c) {
  std::uint64_t lambda_bits;
  std::memcpy(&lambda_bits, &c.lambda, sizeof lambda_bits);
  return {c.rows, c.cols, c.iterations, lambda_bits, c.seed};
}

// The generated image: speckle (a random value per pixel) on a smooth ramp, exponentiated as
// Rodinia does, so that every pixel is positive.
GPM_HOST_DEVICE inline float initial_pixel(std::uint64_t i, std::uint64_t cols,
                                           std::uint64_t seed) {
  const float speckle = static_cast<float>(gpm::mix64(i ^ (seed << 32)) >> 40) * (1.0f / 16777216);
  const float ramp = static_cast<float>(i % cols) / static_cast<float>(cols);
  return expf(0.5f * speckle + ramp);
}

// Neighbour differences of pixel (r, c) with edges clamped: north, south, west, east.
struct gradients {
  float n, s, w, e, centre;
};
GPM_HOST_DEVICE inline gradients gradients_at(const float* j, std::uint64_t r, std::uint64_t c,
                                              std::uint64_t rows, std::uint64_t cols) {
  const float centre = j[r * cols + c];
  return {j[(r == 0 ? 0 : r - 1) * cols + c] - centre,
          j[(r + 1 == rows ? r : r + 1) * cols + c] - centre,
          j[r * cols + (c == 0 ? 0 : c - 1)] - centre,
          j[r * cols + (c + 1 == cols ? c : c + 1)] - centre, centre};
}

// The diffusion coefficient of pixel (r, c) for the image's speckle scale q0sqr.
GPM_HOST_DEVICE inline float coefficient_at(const float* j, std::uint64_t r, std::uint64_t c,
                                            std::uint64_t rows, std::uint64_t cols, float q0sqr) {
  const gradients g = gradients_at(j, r, c, rows, cols);
  const float g2 = (g.n * g.n + g.s * g.s + g.w * g.w + g.e * g.e) / (g.centre * g.centre);
  const float l = (g.n + g.s + g.w + g.e) / g.centre;
  const float num = 0.5f * g2 - (1.0f / 16.0f) * (l * l);
  const float den = 1 + 0.25f * l;
  const float qsqr = num / (den * den);
  const float d = (qsqr - q0sqr) / (q0sqr * (1 + q0sqr));
  const float coefficient = 1.0f / (1.0f + d);
  return coefficient < 0 ? 0.0f : (coefficient > 1 ? 1.0f : coefficient);
}

// The next value of pixel (r, c) from the image and the coefficients.
GPM_HOST_DEVICE inline float updated_at(const float* j, const float* coef, std::uint64_t r,
                                        std::uint64_t c, std::uint64_t rows, std::uint64_t cols,
                                        float lambda) {
  const gradients g = gradients_at(j, r, c, rows, cols);
  const float cn = coef[r * cols + c];
  const float cs = coef[(r + 1 == rows ? r : r + 1) * cols + c];
  const float ce = coef[r * cols + (c + 1 == cols ? c : c + 1)];
  const float divergence = cn * g.n + cs * g.s + cn * g.w + ce * g.e;
  return g.centre + 0.25f * lambda * divergence;
}

// q0sqr from the region's sum and sum of squares (Rodinia's formula).
GPM_HOST_DEVICE inline float speckle_scale(double sum, double sum2, std::uint64_t pixels) {
  const double mean = sum / static_cast<double>(pixels);
  const double var = sum2 / static_cast<double>(pixels) - mean * mean;
  return static_cast<float>(var / (mean * mean));
}

template <bool kToPool, bool kPersist>
__global__ void srad_init(out_array<float> image, std::uint64_t pixels, std::uint64_t cols,
                          std::uint64_t seed, unsigned* blocks_done, std::uint64_t* progress) {
  for (std::uint64_t i : gpm::grid_stride(pixels)) {
    put<kToPool>(image, i, initial_pixel(i, cols, seed));
  }
  if constexpr (kPersist) {
    gpm::persist_at("native.srad.init");  // a grid-stride loop's pixels: no one range
    gpm::publish_when_grid_done(blocks_done, progress, 1, "native.srad.publish");
  }
}

// One block: the region's statistics in a fixed order (the same on every run, so that a resumed
// run computes bit-identical images).
__global__ void srad_stats(const float* j, std::uint64_t cols, std::uint64_t roi_rows,
                           std::uint64_t roi_cols, float* q0sqr) {
  __shared__ double sums[kStatsThreads];
  __shared__ double sums2[kStatsThreads];
  double s = 0, s2 = 0;
  for (std::uint64_t i = threadIdx.x; i < roi_rows * roi_cols; i += blockDim.x) {
    const double v = j[(i / roi_cols) * cols + i % roi_cols];
    s += v;
    s2 += v * v;
  }
  sums[threadIdx.x] = s;
  sums2[threadIdx.x] = s2;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      sums2[threadIdx.x] += sums2[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *q0sqr = speckle_scale(sums[0], sums2[0], roi_rows * roi_cols);
}

template <bool kToPool, bool kPersist>
__global__ void srad_coefficients(const float* j, std::uint64_t rows, std::uint64_t cols,
                                  const float* q0sqr, out_array<float> coef) {
  const float q = *q0sqr;
  for (std::uint64_t i : gpm::grid_stride(rows * cols)) {
    put<kToPool>(coef, i, coefficient_at(j, i / cols, i % cols, rows, cols, q));
  }
  // Before the kernel ends, hence before the publish. Recovery never reads the coefficients (an
  // interrupted iteration is run again from its image): they are a durable result, as in the paper.
  if constexpr (kPersist) gpm::persist_at("native.srad.coefficient");
}

template <bool kToPool, bool kPersist>
__global__ void srad_update(const float* j, const float* coef, std::uint64_t rows,
                            std::uint64_t cols, float lambda, out_array<float> next,
                            unsigned* blocks_done, std::uint64_t* progress, std::uint64_t word) {
  for (std::uint64_t i : gpm::grid_stride(rows * cols)) {
    put<kToPool>(next, i, updated_at(j, coef, i / cols, i % cols, rows, cols, lambda));
  }
  if constexpr (kPersist) {
    gpm::persist_at("native.srad.image");
    gpm::publish_when_grid_done(blocks_done, progress, word, "native.srad.publish");
  }
}

class srad_run {
 public:
  srad_run(const srad_config& c, geometry geo)
      : c_(c),
        geo_(geo),
        pixels_(c.rows * c.cols),
        image_{gpm::device_buffer<float>(pixels_), gpm::device_buffer<float>(pixels_)},
        coef_(pixels_),
        q0sqr_(1) {
    gpm::require(c.rows >= 2 && c.cols >= 2 && c.iterations >= 1,
                 "srad: the image needs at least 2 x 2 pixels and 1 iteration");
  }

  run_summary solve(const run_store& st, sink& out, const progress_fn& progress) {
    run_summary r;
    const std::uint64_t bytes_before = out.bytes_persisted();
    std::uint64_t word = st.progress();
    r.steps_at_start = word & ~kFinished;
    if ((word & kFinished) == 0) {
      if (out.kind() == way::cpu) {
        word = solve_on_cpu(st, out, word, r, progress);
      } else {
        word = solve_on_gpu(st, out, word, r, progress);
      }
      out.finish(stream_, word | kFinished);
    }
    r.steps_total = c_.iterations + 1;
    r.output_checksum = gpm::checksum64(st.host<float>(output_array()), st.bytes(kImage0));
    r.bytes_persisted = out.bytes_persisted() - bytes_before;
    return r;
  }

  int output_array() const { return c_.iterations % 2 == 0 ? kImage0 : kImage1; }

 private:
  std::uint64_t solve_on_gpu(const run_store& st, sink& s, std::uint64_t word, run_summary& r,
                             const progress_fn& progress) {
    const std::uint64_t bytes = pixels_ * sizeof(float);
    const out_array<float> images[2] = {
        {image_[0].data(), s.kernel_writes_pool() ? st.device<float>(kImage0) : nullptr},
        {image_[1].data(), s.kernel_writes_pool() ? st.device<float>(kImage1) : nullptr}};
    const out_array<float> coef{coef_.data(),
                                s.kernel_writes_pool() ? st.device<float>(kCoefficient) : nullptr};
    std::uint64_t* published = s.kernel_persists() ? st.progress_device() : nullptr;
    if (word == 0) {
      with_kernel_variant(s, [&](auto to_pool, auto persist) {
        gpm::launch(srad_init<decltype(to_pool)::value, decltype(persist)::value>, geo_.blocks,
                    geo_.threads, 0, stream_, images[0], pixels_, c_.cols, c_.seed,
                    blocks_done_.get(), published);
      });
      word = 1;
      s.commit(stream_, {{kImage0, image_[0].data(), 0, bytes}}, word);
      if (s.kernel_persists()) s.count_persisted(bytes + sizeof word);
      ++r.steps_run;
      if (progress) progress(1, "srad: started");
    } else {
      // Resuming: the image the next iteration reads is durable in the pool.
      const int from = (word - 1) % 2 == 0 ? kImage0 : kImage1;
      gpm::check_cuda(cudaMemcpy(image_[(word - 1) % 2].data(), st.host<float>(from), bytes,
                                 cudaMemcpyHostToDevice),
                      "cudaMemcpy (srad resume)");
    }
    for (; word - 1 < c_.iterations;) {
      const std::uint64_t k = word - 1;
      const out_array<float>& cur = images[k % 2];
      const out_array<float>& next = images[(k + 1) % 2];
      gpm::launch(srad_stats, 1, kStatsThreads, 0, stream_, cur.mirror, c_.cols,
                  std::min(c_.rows, kRoiSide), std::min(c_.cols, kRoiSide), q0sqr_.data());
      with_kernel_variant(s, [&](auto to_pool, auto persist) {
        constexpr bool kToPool = decltype(to_pool)::value, kPersist = decltype(persist)::value;
        gpm::launch(srad_coefficients<kToPool, kPersist>, geo_.blocks, geo_.threads, 0, stream_,
                    cur.mirror, c_.rows, c_.cols, q0sqr_.data(), coef);
        gpm::launch(srad_update<kToPool, kPersist>, geo_.blocks, geo_.threads, 0, stream_,
                    cur.mirror, coef.mirror, c_.rows, c_.cols, static_cast<float>(c_.lambda), next,
                    blocks_done_.get(), published, word + 1);
      });
      ++word;
      s.commit(stream_,
               {{kCoefficient, coef.mirror, 0, bytes},
                {(k + 1) % 2 == 0 ? kImage0 : kImage1, next.mirror, 0, bytes}},
               word);
      if (s.kernel_persists()) s.count_persisted(2 * bytes + sizeof word);
      ++r.steps_run;
      if (progress) progress(word, "srad: iteration " + std::to_string(k + 1) + " durable");
    }
    return word;
  }

  // The same diffusion by CPU threads on the pool, each row written back once computed.
  std::uint64_t solve_on_cpu(const run_store& st, sink& s, std::uint64_t word, run_summary& r,
                             const progress_fn& progress) {
    const std::uint64_t rows = c_.rows, cols = c_.cols;
    float* images[2] = {st.host<float>(kImage0), st.host<float>(kImage1)};
    float* coef = st.host<float>(kCoefficient);
    cpu_team& team = s.team();
    if (word == 0) {
      team.parallel_for(pixels_, [&](std::uint64_t b, std::uint64_t e) {
        for (std::uint64_t i = b; i < e; ++i) images[0][i] = initial_pixel(i, cols, c_.seed);
        gpm::write_back(images[0] + b, (e - b) * sizeof(float));
      });
      s.commit(stream_, {}, ++word);
      s.count_persisted(pixels_ * sizeof(float) + sizeof word);
      ++r.steps_run;
      if (progress) progress(1, "srad: started");
    }
    for (; word - 1 < c_.iterations;) {
      const std::uint64_t k = word - 1;
      const float* cur = images[k % 2];
      float* next = images[(k + 1) % 2];
      const float q = cpu_speckle_scale(cur);
      team.parallel_for(rows, [&](std::uint64_t b, std::uint64_t e) {
        for (std::uint64_t i = b * cols; i < e * cols; ++i) {
          coef[i] = coefficient_at(cur, i / cols, i % cols, rows, cols, q);
        }
        gpm::write_back(coef + b * cols, (e - b) * cols * sizeof(float));
      });
      team.parallel_for(rows, [&](std::uint64_t b, std::uint64_t e) {
        for (std::uint64_t i = b * cols; i < e * cols; ++i) {
          next[i] =
              updated_at(cur, coef, i / cols, i % cols, rows, cols, static_cast<float>(c_.lambda));
        }
        gpm::write_back(next + b * cols, (e - b) * cols * sizeof(float));
      });
      s.commit(stream_, {}, ++word);
      s.count_persisted(2 * pixels_ * sizeof(float) + sizeof word);
      ++r.steps_run;
      if (progress) progress(word, "srad: iteration " + std::to_string(k + 1) + " durable");
    }
    return word;
  }

  float cpu_speckle_scale(const float* j) const {
    const std::uint64_t rr = std::min(c_.rows, kRoiSide), rc = std::min(c_.cols, kRoiSide);
    double s = 0, s2 = 0;
    for (std::uint64_t r = 0; r < rr; ++r) {
      for (std::uint64_t c = 0; c < rc; ++c) {
        const double v = j[r * c_.cols + c];
        s += v;
        s2 += v * v;
      }
    }
    return speckle_scale(s, s2, rr * rc);
  }

  srad_config c_;
  geometry geo_;
  std::uint64_t pixels_;
  gpm::device_buffer<float> image_[2];
  gpm::device_buffer<float> coef_;
  gpm::device_buffer<float> q0sqr_;
  grid_counter blocks_done_;
  gpm::stream stream_;
};

// The paper's 128K x 1K image on a GPU; a small one on the emulator.
srad_config srad_sizes(const mode_context& ctx) {
  srad_config c;
  c.cols = ctx.options.quick ? 64 : ctx.device.emulated ? 256 : 1024;
  c.rows = ctx.options.quick ? 64 : ctx.device.emulated ? 512 : 128 * 1024;
  if (ctx.options.bytes) c.rows = std::max<std::uint64_t>(2, *ctx.options.bytes / 4 / c.cols);
  c.iterations = ctx.options.quick ? 2 : 8;
  return c;
}

native_problem srad_problem(const mode_context& ctx, way w) {
  const srad_config c = srad_sizes(ctx);
  auto run = std::make_shared<srad_run>(c, filling_geometry(ctx));
  native_problem p;
  p.workload = "srad";
  p.params = srad_params(c);
  p.arrays = srad_arrays(c.rows * c.cols);
  p.sizes = {{"rows", c.rows}, {"cols", c.cols}, {"iterations", c.iterations}};
  p.solve = [run](const run_store& st, sink& s) { return run->solve(st, s, {}); };
  p.check = [c, run, &ctx](const sink& s, const std::string& mode) {
    // The expected image: the CPU implementation (bit-identical to the kernels but for the
    // compilers' floating-point contraction, hence the tolerance), in its own pool.
    bench_pool ref_pool(ctx, "srad-expected", run_store::pool_bytes(srad_arrays(c.rows * c.cols)),
                        bench_pool::kNoObject, 16);
    const run_store ref =
        run_store::create(ref_pool.pool(), "srad", srad_params(c), srad_arrays(c.rows * c.cols));
    sink cpu(way::cpu, ref);
    srad_run(c, {1, 1}).solve(ref, cpu, {});
    std::vector<float> got(c.rows * c.cols);
    s.read_durable(run->output_array(), got.data());
    const float* want = ref.host<float>(run->output_array());
    for (std::uint64_t i = 0; i < got.size(); ++i) {
      if (!(std::fabs(got[i] - want[i]) <= 1e-3f * std::max(1.0f, std::fabs(want[i])))) {
        check_failed("srad/" + mode + ": pixel " + std::to_string(i) + " is " +
                     std::to_string(got[i]) + ", expected " + std::to_string(want[i]));
      }
    }
  };
  return p;
}

}  // namespace

run_summary run_srad(const std::string& pool_path, const gpm::pool_options& options,
                     const srad_config& config, bool resume, const progress_fn& progress) {
  srad_run run(config, kernel_geometry(config.geo));
  return run_in_pool(pool_path, options, "srad", srad_params(config),
                     srad_arrays(config.rows * config.cols), config.how, resume,
                     [&](const run_store& st, sink& s) { return run.solve(st, s, progress); });
}

workload srad_workload() {
  return {"srad",
          "speckle-reducing anisotropic diffusion whose coefficients and image the kernels persist "
          "per iteration (GPM paper Table 1, Figure 9)",
          native_modes(srad_problem, [](const mode_context& ctx) {
            const srad_config c = srad_sizes(ctx);
            return 2 * c.rows * c.cols * sizeof(float);
          })};
}

}  // namespace gpmbench::native
