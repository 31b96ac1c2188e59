// gpmbench `ooc` workloads whose items are independent or reduced (DRAGON SC'18 Table I):
// ooc_vectoradd, ooc_blackscholes, ooc_binomial, ooc_backprop (previous weights volatile), and
// the read-ahead, line-size and output-mode ablations on vectoradd. docs/workloads/ooc.md describes them.
#include <cmath>

#include "ooc_engine.cuh"

namespace gpmbench::ooc {

namespace {

constexpr std::uint64_t kSeed = 18;
constexpr std::uint64_t kGiB = 1ull << 30;

// c[i] = a[i] + b[i].
struct vectoradd : no_reduction {
  static constexpr const char* name = "ooc_vectoradd";
  static constexpr float tolerance = 1e-6f;
  struct params {
    std::uint64_t seed;
  };
  enum : int { kA, kB, kC };

  static problem<vectoradd> make(std::uint64_t footprint, bool) {
    problem<vectoradd> p;
    p.params = {kSeed};
    p.arrays = {{"a", role::input, 1}, {"b", role::input, 1}, {"c", role::output, 1}};
    p.items = items_for(footprint, p.arrays);
    p.passes = {{{}, {{kA, 0}, {kB, 0}}, {kC}}};
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    return unit_value(p.seed, a, e);
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params&, const pass_args&, const Acc& acc,
                                      std::uint64_t i, std::uint32_t, local&) {
    acc.store(kC, i, acc.load(kA, i) + acc.load(kB, i));
  }
};

// The standard normal distribution function (Abramowitz-Stegun polynomial, as NVIDIA's sample).
GPM_HOST_DEVICE inline float normal_cdf(float d) {
  const float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
  const float poly =
      k * (0.31938153f + k * (-0.356563782f + k * (1.781477937f + k * (-1.821255978f + k * 1.330274429f))));
  const float c = 0.3989422804f * expf(-0.5f * d * d) * poly;
  return d > 0 ? 1.0f - c : c;
}

// Option inputs: spot price, strike and years, as NVIDIA's BlackScholes sample draws them.
GPM_HOST_DEVICE inline float option_input(std::uint64_t seed, int a, std::uint64_t e) {
  const float u = unit_value(seed, a, e);
  return a == 0 ? 5.0f + 25.0f * u : a == 1 ? 1.0f + 99.0f * u : 0.25f + 9.75f * u;
}
constexpr float kRiskFree = 0.02f;
constexpr float kVolatility = 0.30f;

// European call and put prices by the Black-Scholes formula.
struct blackscholes : no_reduction {
  static constexpr const char* name = "ooc_blackscholes";
  static constexpr float tolerance = 1e-4f;
  struct params {
    std::uint64_t seed;
  };
  enum : int { kS, kX, kT, kCall, kPut };

  static problem<blackscholes> make(std::uint64_t footprint, bool) {
    problem<blackscholes> p;
    p.params = {kSeed};
    p.arrays = {{"spot", role::input, 1},   {"strike", role::input, 1}, {"years", role::input, 1},
                {"call", role::output, 1}, {"put", role::output, 1}};
    p.items = items_for(footprint, p.arrays);
    p.passes = {{{}, {{kS, 0}, {kX, 0}, {kT, 0}}, {kCall, kPut}}};
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    return option_input(p.seed, a, e);
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params&, const pass_args&, const Acc& acc,
                                      std::uint64_t i, std::uint32_t, local&) {
    const float s = acc.load(kS, i), x = acc.load(kX, i), t = acc.load(kT, i);
    const float sqrt_t = sqrtf(t);
    const float d1 = (logf(s / x) + (kRiskFree + 0.5f * kVolatility * kVolatility) * t) /
                     (kVolatility * sqrt_t);
    const float d2 = d1 - kVolatility * sqrt_t;
    const float discounted = x * expf(-kRiskFree * t);
    acc.store(kCall, i, s * normal_cdf(d1) - discounted * normal_cdf(d2));
    acc.store(kPut, i, discounted * (1.0f - normal_cdf(d2)) - s * (1.0f - normal_cdf(d1)));
  }
};

// European calls priced on a binomial (Cox-Ross-Rubinstein) tree of kSteps steps per option.
struct binomial : no_reduction {
  static constexpr const char* name = "ooc_binomial";
  static constexpr float tolerance = 1e-3f;
  static constexpr int kSteps = 32;
  struct params {
    std::uint64_t seed;
  };
  enum : int { kS, kX, kT, kPrice };

  static problem<binomial> make(std::uint64_t footprint, bool) {
    problem<binomial> p;
    p.params = {kSeed};
    p.arrays = {{"spot", role::input, 1}, {"strike", role::input, 1}, {"years", role::input, 1},
                {"price", role::output, 1}};
    p.items = items_for(footprint, p.arrays);
    p.passes = {{{}, {{kS, 0}, {kX, 0}, {kT, 0}}, {kPrice}}};
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    return option_input(p.seed, a, e);
  }
  template <class Acc>
  GPM_HOST_DEVICE static void element(const params&, const pass_args&, const Acc& acc,
                                      std::uint64_t i, std::uint32_t, local&) {
    const float s = acc.load(kS, i), x = acc.load(kX, i), t = acc.load(kT, i);
    const float dt = t / kSteps;
    const float vdt = kVolatility * sqrtf(dt);
    const float u = expf(vdt), d = 1.0f / u;
    const float pu = (expf(kRiskFree * dt) - d) / (u - d);
    const float disc = expf(-kRiskFree * dt);
    float v[kSteps + 1];
    for (int k = 0; k <= kSteps; ++k) v[k] = fmaxf(s * expf(vdt * (2 * k - kSteps)) - x, 0.0f);
    for (int n = kSteps; n > 0; --n) {
      for (int k = 0; k < n; ++k) v[k] = disc * (pu * v[k + 1] + (1.0f - pu) * v[k]);
    }
    acc.store(kPrice, i, v[0]);
  }
};

// One training step of Rodinia's backprop on a wide input layer: the forward pass reduces
// input x weights into kHidden sums (the small array), the backward pass adjusts every weight
// with momentum from the previous weights, which are volatile (DRAGON's D_VOLATILE).
struct backprop {
  static constexpr const char* name = "ooc_backprop";
  static constexpr float tolerance = 2e-3f;
  static constexpr std::uint32_t kHidden = 16;
  struct params {
    std::uint64_t seed;
    std::uint64_t items;
  };
  struct local {
    float sum[kHidden];
  };
  enum : int { kInput, kWeights, kNewWeights, kPrevious };
  enum : int { kForward, kBackward };

  static problem<backprop> make(std::uint64_t footprint, bool) {
    problem<backprop> p;
    p.arrays = {{"input", role::input, 1},
                {"weights", role::input, kHidden},
                {"new-weights", role::output, kHidden},
                {"previous-weights", role::scratch, kHidden}};
    p.items = items_for(footprint, p.arrays);
    p.params = {kSeed, p.items};
    p.small_floats = kHidden;
    p.passes = {{{kForward, {}}, {{kInput, 0}, {kWeights, 0}}, {}},
                {{kBackward, {}},
                 {{kInput, 0}, {kWeights, 0}, {kPrevious, 0}},
                 {kNewWeights, kPrevious},
                 kHidden}};
    return p;
  }
  GPM_HOST_DEVICE static float input(const params& p, int a, std::uint64_t e) {
    const float u = unit_value(p.seed, a, e);
    return a == kInput ? u : 0.1f * (u - 0.5f);
  }
  GPM_HOST_DEVICE static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
  // The output layer's fixed weights.
  GPM_HOST_DEVICE static float output_weight(std::uint32_t j) { return 0.05f * (1.0f + j); }

  template <class Acc>
  GPM_HOST_DEVICE static void element(const params& p, const pass_args& args, const Acc& acc,
                                      std::uint64_t i, std::uint32_t j, local& l) {
    if (args.kind == kForward) {
      const float x = acc.load(kInput, i);
      for (std::uint32_t k = 0; k < kHidden; ++k) l.sum[k] += x * acc.load(kWeights, i * kHidden + k);
      return;
    }
    // Every thread recomputes the tiny hidden and output layers from the sums.
    const float scale = 1.0f / static_cast<float>(p.items);
    float out = 0;
    for (std::uint32_t k = 0; k < kHidden; ++k) out += sigmoid(acc.small[k] * scale) * output_weight(k);
    out = sigmoid(out);
    const float delta_out = out * (1.0f - out) * (0.1f - out);
    const float h = sigmoid(acc.small[j] * scale);
    const float delta = h * (1.0f - h) * delta_out * output_weight(j);
    const std::uint64_t e = i * kHidden + j;
    const float dw = 0.3f * delta * acc.load(kInput, i) + 0.3f * acc.load(kPrevious, e);
    acc.store(kNewWeights, e, acc.load(kWeights, e) + dw);
    acc.store(kPrevious, e, dw);
  }
  template <class Acc>
  GPM_HOST_DEVICE static void finish(const params&, const pass_args& args, const Acc& acc, local& l) {
    if (args.kind != kForward) return;
    for (std::uint32_t k = 0; k < kHidden; ++k) {
      if (l.sum[k] != 0) acc.add_small(k, l.sum[k]);
    }
  }
};

}  // namespace

workload vectoradd_workload() {
  return family_workload<vectoradd>("DRAGON vectorAdd: c = a + b over files, streaming", 4 * kGiB);
}
workload blackscholes_workload() {
  return family_workload<blackscholes>(
      "DRAGON BlackScholes: call and put prices of options in files, streaming", 4 * kGiB);
}
workload binomial_workload() {
  return family_workload<binomial>(
      "DRAGON binomialOptions: 32-step binomial tree per option, compute-heavy streaming", kGiB);
}
workload backprop_workload() {
  return family_workload<backprop>(
      "DRAGON backprop: a training step of a wide layer, previous weights volatile", 2 * kGiB);
}

workload ablation_readahead_workload() {
  return ablation_workload<vectoradd>("ooc_ablation_readahead",
                             "gpmkit read-ahead on and off: vectoradd out of core (DRAGON Fig. 5)",
                             2 * kGiB, {"read-ahead-on", "read-ahead-off"});
}
workload ablation_line_workload() {
  return ablation_workload<vectoradd>("ooc_ablation_line",
                             "gpmkit line size 1/16, 1/4, 1 and 2 x the default: vectoradd out of core",
                             2 * kGiB, {"line-div16", "line-div4", "line-x1", "line-x2"});
}

workload ablation_output_workload() {
  return ablation_workload<vectoradd>(
      "ooc_ablation_output",
      "gpmkit's output mapping mode::read_write and mode::write: vectoradd out of core",
      2 * kGiB, {"outputs-read-write", "outputs-write"});
}

workload ablation_sync_workload() {
  return ablation_workload<vectoradd>(
      "ooc_ablation_sync",
      "gpmkit's outputs synced plainly and crash-consistently (an epoch through a redo log): "
      "vectoradd out of core",
      2 * kGiB, {"sync-plain", "sync-crash-consistent"});
}

}  // namespace gpmbench::ooc
