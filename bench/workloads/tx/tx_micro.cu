// gpmbench workloads tx_micro_pressure and tx_ring_sweep: the Helper Warps paper's
// micro-benchmarks. tx_micro_pressure is the write-pressure test (TPDS'20 Fig. 9) made
// transactional: conflict-free transactions that each write k words (k = 1 .. 16), so the bytes
// persisted per commit grow with k, in every persistence mode. tx_ring_sweep runs ATM A1 with
// helper warps over ring sizes from 500 to 9,000 entries (the paper's Fig. 17 sweep) against the
// committing-thread baseline. tx_residency_sweep runs ATM A1 in volatile, redo-direct and helpers
// mode with at most 1, 2 or as many blocks an SM as fit (tx_options::max_blocks_per_sm): fewer
// transactions at once, fewer conflicts (docs/workloads/tx.md, "Registers decide how many
// blocks run"); and in adaptive mode with and without the number learnt per kernel
// (tx_options::learn_residency).
#include "gpmbench/resources.hpp"
#include "workloads/tx/tx_apps.hpp"

namespace gpmbench::tx {

namespace {

constexpr std::uint32_t kPressureWrites[] = {1, 2, 4, 8, 16};
constexpr std::uint32_t kMaxPressureWrites = 16;
constexpr std::uint32_t kSweepRingEntries[] = {500, 1000, 1300, 2000, 3000, 5000, 9000};
constexpr std::uint32_t kSweepBlocksPerSm[] = {0, 2, 1};  // 0: as many as fit

// Transaction i writes i + 1 into words [i * k, i * k + k): no two transactions share a word.
struct pressure_writes {
  std::uint64_t count;
  std::uint32_t k;
  std::uint64_t* failures;

  __device__ void operator()(gpm::tx_ref tx) const {
    std::uint64_t failed = 0;
    for (std::uint64_t i : tx.workers(count)) {
      const gpm::tx_result r = tx.run<kMaxPressureWrites, kMaxPressureWrites>([&](auto& t) {
        for (std::uint32_t j = 0; j < k; ++j) t.write(i * k + j, static_cast<std::uint32_t>(i + 1));
      });
      failed += r.status != gpm::tx_status::committed;
    }
    count_failures(failures, failed);
  }
};

class pressure final : public application {
 public:
  pressure(std::uint64_t transactions, std::uint32_t k) : count_(transactions), k_(k) {}

  std::uint64_t words() const override { return count_ * k_; }
  std::uint64_t transactions() const override { return count_; }
  std::uint32_t record_words() const override { return k_; }
  named_counts sizes() const override { return {{"words_per_transaction", k_}}; }
  void reset(gpm::tx_heap& heap) override { store_zeroes(heap); }
  std::vector<double> run(gpm::tx_heap& heap, launch_shape launch, cudaStream_t s) override {
    return {failures_.timed_launch(heap, launch, s, pressure_writes{count_, k_, failures_.device()},
                                   "write pressure")};
  }
  // Each transaction's words all hold its value (complete), or all or none of them (recovered).
  void check(const gpm::tx_heap& heap, bool complete) override {
    std::vector<std::uint32_t> w(words());
    heap.load(0, w.data(), w.size());
    for (std::uint64_t i = 0; i < count_; ++i) {
      const std::uint32_t first = w[i * k_];
      bool whole = first == i + 1 || (!complete && first == 0);
      for (std::uint32_t j = 1; j < k_ && whole; ++j) whole = w[i * k_ + j] == first;
      if (!whole) {
        check_failed("write pressure: transaction " + std::to_string(i) + "'s " +
                     std::to_string(k_) + " words are not " +
                     (complete ? "all its value" : "all its value or all unwritten"));
      }
    }
  }

 private:
  std::uint64_t count_;
  std::uint32_t k_;
  failure_counter failures_;
};

}  // namespace

}  // namespace gpmbench::tx

namespace gpmbench {

workload tx_micro_pressure_workload() {
  using namespace tx;
  workload w{"tx_micro_pressure",
             "write pressure (TPDS'20 Fig. 9): 1M conflict-free transactions writing k = 1..16 "
             "words each, in every persistence mode",
             {ceiling_mode()}};
  for (const std::uint32_t k : kPressureWrites) {
    const application_factory make = [k](const mode_context& ctx) -> std::unique_ptr<application> {
      return std::make_unique<pressure>(scaled(ctx, 1'000'000, 16, 256), k);
    };
    for (const persistence& p : persistences()) {
      w.modes.push_back(tx_mode_of("w" + std::to_string(k) + ":" + p.name,
                                   p.summary + ", " + std::to_string(k) + " words per transaction",
                                   make, {p, paper_launch}));
    }
  }
  return w;
}

workload tx_ring_sweep_workload() {
  using namespace tx;
  const application_factory a1 = atm_application(100'000, 1'000'000);
  workload w{"tx_ring_sweep",
             "ATM A1 with helper warps over ring sizes of 500 to 9,000 entries (TPDS'20 Fig. 17), "
             "against the committing-thread baseline",
             {ceiling_mode()}};
  w.modes.push_back(tx_mode_of("redo-direct", persistence_named("redo-direct").summary, a1,
                               {persistence_named("redo-direct"), paper_launch}));
  for (const std::uint32_t entries : kSweepRingEntries) {
    const persistence& helpers = persistence_named("helpers");
    w.modes.push_back(tx_mode_of("helpers-ring" + std::to_string(entries),
                                 helpers.summary + ", " + std::to_string(entries) + " ring entries",
                                 a1, {helpers, paper_launch, entries}));
  }
  return w;
}

workload tx_residency_sweep_workload() {
  using namespace tx;
  const application_factory a1 = atm_application(100'000, 1'000'000);
  workload w{"tx_residency_sweep",
             "ATM A1 with at most 1, 2 or as many blocks an SM as fit, in volatile, redo-direct "
             "and helpers mode, and in adaptive mode with and without blocks an SM learnt: how "
             "residency moves conflicts",
             {ceiling_mode()}};
  for (const std::uint32_t cap : kSweepBlocksPerSm) {
    for (const char* name : {"volatile", "redo-direct", "helpers"}) {
      const persistence& p = persistence_named(name);
      const std::string suffix = cap == 0 ? "" : "-sm" + std::to_string(cap);
      const std::string limit = cap == 0 ? ", as many blocks an SM as fit"
                                         : ", at most " + std::to_string(cap) +
                                               (cap == 1 ? " block" : " blocks") + " an SM";
      w.modes.push_back(
          tx_mode_of(p.name + suffix, p.summary + limit, a1,
                     {p, paper_launch, kPaperRingEntries, gpm::tx_reads::locked, cap}));
    }
  }
  const persistence& adaptive = persistence_named("adaptive");
  for (const bool learn : {false, true}) {
    w.modes.push_back(tx_mode_of(
        learn ? "adaptive-learned" : "adaptive",
        adaptive.summary + (learn ? ", blocks an SM learnt per kernel from its launches' commit "
                                    "rates"
                                  : ", as many blocks an SM as fit"),
        a1, {adaptive, paper_launch, kPaperRingEntries, gpm::tx_reads::locked, 0, learn}));
  }
  return w;
}

}  // namespace gpmbench
