// cp_dnn: training a two-layer perceptron (GPM ASPLOS'22, Fig. 7: checkpointing DNN weights) by
// full-batch gradient descent with momentum, on a synthetic classification set generated in code:
// each of 10 classes is a Gaussian-like cloud around its own centre. The state checkpointed is
// the weights, biases and momentum (every iteration); the data is regenerated, not checkpointed.
#include <cmath>
#include <memory>

#include <gpm/platform/kernel.cuh>

#include "app.hpp"
#include "kernels_common.hpp"
#include "resources.hpp"

namespace gpmbench {

namespace {

using namespace cp_apps;

constexpr unsigned kClasses = 10;

struct dims {
  std::uint64_t samples, inputs, hidden;
};

__global__ void make_data(float* x, int* label, dims d) {
  for (std::uint64_t i : gpm::grid_stride(d.samples * d.inputs)) {
    const std::uint64_t n = i / d.inputs, f = i % d.inputs;
    const int c = static_cast<int>(gpm::mix64(n) % kClasses);
    if (f == 0) label[n] = c;
    const float centre = 2 * uniform01(31 + c, f) - 1;
    x[i] = centre + 0.8f * (uniform01(32, i) + uniform01(33, i) - 1);
  }
}
__global__ void init_weights(float* w, std::uint64_t n, float scale, std::uint64_t stream) {
  for (std::uint64_t i : gpm::grid_stride(n))
    w[i] = scale * (2 * uniform01(stream, i) - 1);
}
// hidden = relu(x W1 + b1)
__global__ void forward_hidden(const float* x, const float* w1, const float* b1, float* h, dims d) {
  for (std::uint64_t i : gpm::grid_stride(d.samples * d.hidden)) {
    const std::uint64_t n = i / d.hidden, j = i % d.hidden;
    float a = b1[j];
    for (std::uint64_t f = 0; f < d.inputs; ++f) a += x[n * d.inputs + f] * w1[f * d.hidden + j];
    h[i] = a > 0 ? a : 0;
  }
}
// Softmax cross-entropy per sample: dlogits = (p - onehot) / samples; loss summed.
__global__ void output_layer(const float* h, const float* w2, const float* b2, const int* label,
                             float* dlogits, float* loss, dims d) {
  for (std::uint64_t n : gpm::grid_stride(d.samples)) {
    float z[kClasses];
    float top = -1e30f;
    for (unsigned c = 0; c < kClasses; ++c) {
      float a = b2[c];
      for (std::uint64_t j = 0; j < d.hidden; ++j) a += h[n * d.hidden + j] * w2[j * kClasses + c];
      z[c] = a;
      top = fmaxf(top, a);
    }
    float sum = 0;
    for (unsigned c = 0; c < kClasses; ++c) sum += z[c] = expf(z[c] - top);
    for (unsigned c = 0; c < kClasses; ++c) {
      const float p = z[c] / sum;
      dlogits[n * kClasses + c] =
          (p - (static_cast<int>(c) == label[n] ? 1.0f : 0.0f)) / static_cast<float>(d.samples);
    }
    atomicAdd(loss, -logf(fmaxf(z[label[n]] / sum, 1e-30f)) / static_cast<float>(d.samples));
  }
}
// dhidden = (dlogits W2^T) * relu'(hidden), in place of nothing: written to dh.
__global__ void backward_hidden(const float* h, const float* w2, const float* dlogits, float* dh,
                                dims d) {
  for (std::uint64_t i : gpm::grid_stride(d.samples * d.hidden)) {
    const std::uint64_t n = i / d.hidden, j = i % d.hidden;
    float g = 0;
    for (unsigned c = 0; c < kClasses; ++c) g += dlogits[n * kClasses + c] * w2[j * kClasses + c];
    dh[i] = h[i] > 0 ? g : 0;
  }
}
// One SGD-with-momentum step of a weight matrix W[rows][cols] whose gradient is a^T b, where
// a is [samples][rows] and b is [samples][cols]; a == nullptr means a bias (a = 1).
__global__ void momentum_step(float* w, float* velocity, const float* a, const float* b,
                              std::uint64_t rows, std::uint64_t cols, std::uint64_t samples,
                              float rate) {
  for (std::uint64_t i : gpm::grid_stride(rows * cols)) {
    const std::uint64_t r = i / cols, c = i % cols;
    float g = 0;
    for (std::uint64_t n = 0; n < samples; ++n) {
      g += (a != nullptr ? a[n * rows + r] : 1.0f) * b[n * cols + c];
    }
    velocity[i] = 0.9f * velocity[i] + g;
    w[i] -= rate * velocity[i];
  }
}

class dnn_app final : public iterative_app {
 public:
  explicit dnn_app(dims d)
      : d_(d),
        x_(d.samples * d.inputs),
        label_(d.samples),
        h_(d.samples * d.hidden),
        dh_(d.samples * d.hidden),
        dlogits_(d.samples * kClasses),
        loss_(2),
        w1_(d.inputs * d.hidden),
        b1_(d.hidden),
        w2_(d.hidden * kClasses),
        b2_(kClasses),
        v1_(w1_.size()),
        vb1_(b1_.size()),
        v2_(w2_.size()),
        vb2_(b2_.size()) {
    gpm::launch(make_data, blocks_for(d.samples * d.inputs), kThreads, 0, nullptr, x_.data(),
                label_.data(), d);
    init(w1_, 1.0f / std::sqrt(static_cast<float>(d.inputs)), 41);
    init(w2_, 1.0f / std::sqrt(static_cast<float>(d.hidden)), 42);
    for (auto* b : {&b1_, &b2_, &v1_, &vb1_, &v2_, &vb2_}) b->fill_bytes(0);
    gpm::check_cuda(cudaDeviceSynchronize(), "dnn init");
  }
  std::vector<app_chunk> chunks() override {
    std::vector<app_chunk> out;
    const std::pair<const char*, gpm::device_buffer<float>*> state[] = {
        {"w1", &w1_},          {"b1", &b1_},          {"w2", &w2_},
        {"b2", &b2_},          {"w1_momentum", &v1_}, {"b1_momentum", &vb1_},
        {"w2_momentum", &v2_}, {"b2_momentum", &vb2_}};
    for (const auto& [name, buf] : state) {
      out.push_back({name, buf->data(), buf->bytes(), chunk_change::every_iteration});
    }
    return out;
  }
  void iterate(std::uint64_t, cudaStream_t s, const std::function<void()>& early_done) override {
    early_done();  // every chunk changes at the iteration's end
    const dims d = d_;
    // loss_[0] keeps the first iteration's loss, loss_[1] the latest one's.
    float* loss = loss_.data() + (first_ ? 0 : 1);
    first_ = false;
    gpm::check_cuda(cudaMemsetAsync(loss, 0, 4, s), "cudaMemsetAsync");
    gpm::launch(forward_hidden, blocks_for(d.samples * d.hidden), kThreads, 0, s, x_.data(),
                w1_.data(), b1_.data(), h_.data(), d);
    gpm::launch(output_layer, blocks_for(d.samples), kThreads, 0, s, h_.data(), w2_.data(),
                b2_.data(), label_.data(), dlogits_.data(), loss, d);
    gpm::launch(backward_hidden, blocks_for(d.samples * d.hidden), kThreads, 0, s, h_.data(),
                w2_.data(), dlogits_.data(), dh_.data(), d);
    constexpr float kRate = 0.05f;
    gpm::launch(momentum_step, blocks_for(d.hidden * kClasses), kThreads, 0, s, w2_.data(),
                v2_.data(), h_.data(), dlogits_.data(), d.hidden, std::uint64_t{kClasses},
                d.samples, kRate);
    gpm::launch(momentum_step, 1, kThreads, 0, s, b2_.data(), vb2_.data(), nullptr, dlogits_.data(),
                std::uint64_t{1}, std::uint64_t{kClasses}, d.samples, kRate);
    gpm::launch(momentum_step, blocks_for(d.inputs * d.hidden), kThreads, 0, s, w1_.data(),
                v1_.data(), x_.data(), dh_.data(), d.inputs, d.hidden, d.samples, kRate);
    gpm::launch(momentum_step, blocks_for(d.hidden), kThreads, 0, s, b1_.data(), vb1_.data(),
                nullptr, dh_.data(), std::uint64_t{1}, d.hidden, d.samples, kRate);
  }
  named_counts sizes() const override {
    return {{"samples", d_.samples}, {"inputs", d_.inputs}, {"hidden", d_.hidden}};
  }
  named_values figures() override {
    float loss[2];
    gpm::check_cuda(cudaMemcpy(loss, loss_.data(), 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
    // Training must have made progress: the loss is finite and below the first iteration's.
    if (!(loss[1] < loss[0])) {
      check_failed("cp_dnn: the loss did not fall (from " + std::to_string(loss[0]) + " to " +
                   std::to_string(loss[1]) + ")");
    }
    return {{"loss_first", loss[0]}, {"loss", loss[1]}};
  }

 private:
  void init(gpm::device_buffer<float>& w, float scale, std::uint64_t stream) {
    gpm::launch(init_weights, blocks_for(w.size()), kThreads, 0, nullptr, w.data(), w.size(), scale,
                stream);
  }

  dims d_;
  bool first_ = true;
  gpm::device_buffer<float> x_;
  gpm::device_buffer<int> label_;
  gpm::device_buffer<float> h_, dh_, dlogits_, loss_, w1_, b1_, w2_, b2_, v1_, vb1_, v2_, vb2_;
};

}  // namespace

std::unique_ptr<iterative_app> make_dnn_app(const mode_context& ctx) {
  const dims d = scale_of(ctx) == app_scale::gpu        ? dims{2048, 1024, 4096}
                 : scale_of(ctx) == app_scale::emulator ? dims{256, 32, 128}
                                                        : dims{64, 16, 32};
  return std::make_unique<dnn_app>(d);
}

}  // namespace gpmbench
