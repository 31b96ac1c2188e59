// gpmbench workloads tx_hash_h1 and tx_hash_h2: the Helper Warps paper's Hashtable (TPDS'20
// §6.3), inserts of random keys as transactions into a table of key-value entries on a
// gpm::tx_heap: a key goes to its entry in the base table, or, when that is taken, to the
// extended table, probed linearly from a second hash. H1: 500K inserts into 15M base + 35M
// extended entries; H2: 900K into 1M + 3M (more collisions, more conflicts).
#include <algorithm>

#include <gpm/platform/hash.hpp>

#include "gpmbench/resources.hpp"
#include "workloads/tx/tx_apps.hpp"

namespace gpmbench::tx {

namespace {

// Entries probed in the extended table before an insert gives up (the transaction's read set
// holds the base entry, these and the value word).
constexpr std::uint32_t kMaxProbes = 24;

// Entry e is words 2e (the key, 0: empty) and 2e + 1 (the value); entries [0, base) are the base
// table, [base, base + extended) the extended one.
struct table_plan {
  std::uint64_t base;
  std::uint64_t extended;

  // Insert i's key: a bijection of i + 1 on 32 bits that keeps 0 at 0 (murmur3's finaliser), so
  // keys are distinct and never 0.
  GPM_HOST_DEVICE static std::uint32_t key(std::uint64_t i) {
    auto h = static_cast<std::uint32_t>(i + 1);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
  }
  GPM_HOST_DEVICE static std::uint32_t value(std::uint32_t key) { return key * 2654435761u + 7; }
  GPM_HOST_DEVICE std::uint64_t home(std::uint32_t key) const { return gpm::mix64(key) % base; }
  GPM_HOST_DEVICE std::uint64_t probe_start(std::uint32_t key) const {
    return gpm::mix64(key ^ 0x45585445ull) % extended;  // "EXTE"
  }
};

struct inserts {
  table_plan plan;
  std::uint64_t count;
  std::uint64_t* failures;

  __device__ void operator()(gpm::tx_ref tx) const {
    std::uint64_t failed = 0;
    for (std::uint64_t i : tx.workers(count)) {
      const std::uint32_t key = table_plan::key(i);
      const gpm::tx_result r = tx.run([&](auto& t) {
        std::uint64_t entry = plan.home(key);
        if (t.read(2 * entry) != 0) {
          const std::uint64_t start = plan.probe_start(key);
          for (std::uint32_t probe = 0;; ++probe) {
            // A doomed attempt reads 0s and stops here; run() retries it.
            if (probe == kMaxProbes) return t.cancel();
            entry = plan.base + (start + probe) % plan.extended;
            if (t.read(2 * entry) == 0) break;
          }
        }
        t.write(2 * entry, key);
        t.write(2 * entry + 1, table_plan::value(key));
      });
      failed += r.status != gpm::tx_status::committed;
    }
    count_failures(failures, failed);
  }
};

class hashtable final : public application {
 public:
  hashtable(std::uint64_t inserts, std::uint64_t base, std::uint64_t extended)
      : plan_{base, extended}, inserts_(inserts), expected_(inserts) {
    for (std::uint64_t i = 0; i < inserts; ++i) expected_[i] = table_plan::key(i);
    std::sort(expected_.begin(), expected_.end());
  }

  std::uint64_t words() const override { return 2 * (plan_.base + plan_.extended); }
  std::uint64_t transactions() const override { return inserts_; }
  std::uint32_t record_words() const override { return 2; }
  named_counts sizes() const override {
    return {
        {"inserts", inserts_}, {"base_entries", plan_.base}, {"extended_entries", plan_.extended}};
  }
  void reset(gpm::tx_heap& heap) override { store_zeroes(heap); }
  std::vector<double> run(gpm::tx_heap& heap, launch_shape launch, cudaStream_t s) override {
    return {failures_.timed_launch(heap, launch, s, inserts{plan_, inserts_, failures_.device()},
                                   "Hashtable (an insert that found no free entry in " +
                                       std::to_string(kMaxProbes) + " probes is one)")};
  }
  // Every key in the table once, with its value: all inserted keys after a complete repeat, some
  // of them after a recovery.
  void check(const gpm::tx_heap& heap, bool complete) override {
    std::vector<std::uint32_t> words(this->words());
    heap.load(0, words.data(), words.size());
    std::vector<std::uint32_t> found;
    for (std::uint64_t e = 0; e < words.size() / 2; ++e) {
      const std::uint32_t key = words[2 * e];
      if (key == 0) continue;
      if (words[2 * e + 1] != table_plan::value(key)) {
        check_failed("Hashtable: entry " + std::to_string(e) + " holds key " + std::to_string(key) +
                     " with a wrong value");
      }
      found.push_back(key);
    }
    std::sort(found.begin(), found.end());
    if (std::adjacent_find(found.begin(), found.end()) != found.end()) {
      check_failed("Hashtable: a key is in the table twice");
    }
    if (complete ? found != expected_
                 : !std::includes(expected_.begin(), expected_.end(), found.begin(), found.end())) {
      check_failed("Hashtable: the table holds " + std::to_string(found.size()) + " keys, not " +
                   (complete ? "the " + std::to_string(inserts_) + " inserted"
                             : "a subset of the inserted ones"));
    }
  }

 private:
  table_plan plan_;
  std::uint64_t inserts_;
  std::vector<std::uint32_t> expected_;  // the inserted keys, sorted
  failure_counter failures_;
};

}  // namespace

application_factory hash_application(std::uint64_t inserts, std::uint64_t base,
                                     std::uint64_t extended) {
  return [=](const mode_context& ctx) -> std::unique_ptr<application> {
    return std::make_unique<hashtable>(scaled(ctx, inserts, 16, 256), scaled(ctx, base, 16, 256),
                                       scaled(ctx, extended, 16, 256));
  };
}

}  // namespace gpmbench::tx

namespace gpmbench {

workload tx_hash_h1_workload() {
  return tx::paper_workload(
      "tx_hash_h1",
      "Hashtable H1: 500K inserts into 15M base + 35M extended entries, linear probing (TPDS'20)",
      tx::hash_application(500'000, 15'000'000, 35'000'000));
}

workload tx_hash_h2_workload() {
  return tx::paper_workload(
      "tx_hash_h2",
      "Hashtable H2: 900K inserts into 1M base + 3M extended entries, linear probing (TPDS'20)",
      tx::hash_application(900'000, 1'000'000, 3'000'000));
}

}  // namespace gpmbench
