// gpmbench workloads tx_hash_h1 and tx_hash_h2: the Helper Warps paper's Hashtable (TPDS'20
// §6.3), inserts of random keys as transactions into a table of key-value entries on a
// gpm::tx_heap: a key goes to its entry in the base table, or, when that is taken, to the
// extended table, probed linearly from a second hash. H1: 500K inserts into 15M base + 35M
// extended entries; H2: 900K into 1M + 3M (more collisions, more conflicts).
// tx_hash_lookup (not the paper's): read-heavy work on H2's table, preloaded with its 900K keys:
// 900K transactions, 9 in 10 of them lookups (half of those of 1,024 hot keys), 1 in 10 inserts,
// with the paper's locked reads and with versioned reads (tx_reads).
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
  // The entry that holds `key`, or its first empty one (probe kMaxProbes of the extended table:
  // none left), in the table `key_at(entry)` reads (a transaction's reads, or a host image).
  template <class KeyAt>
  GPM_HOST_DEVICE std::uint64_t find(std::uint32_t key, KeyAt&& key_at) const {
    std::uint64_t entry = home(key);
    std::uint32_t k = key_at(entry);
    if (k == 0 || k == key) return entry;
    const std::uint64_t start = probe_start(key);
    for (std::uint32_t probe = 0; probe < kMaxProbes; ++probe) {
      // A doomed attempt reads 0s and stops at once; run() retries it.
      entry = base + (start + probe) % extended;
      k = key_at(entry);
      if (k == 0 || k == key) return entry;
    }
    return kNoEntry;
  }
  static constexpr std::uint64_t kNoEntry = ~0ull;
};

// Inserts `key` (absent) as one transaction's body; cancels when no entry is free.
template <class Tx>
__device__ void insert_body(const table_plan& plan, Tx& t, std::uint32_t key) {
  const std::uint64_t entry = plan.find(key, [&](std::uint64_t e) { return t.read(2 * e); });
  if (entry == table_plan::kNoEntry) return t.cancel();
  t.write(2 * entry, key);
  t.write(2 * entry + 1, table_plan::value(key));
}

struct inserts {
  table_plan plan;
  std::uint64_t count;
  std::uint64_t* failures;

  __device__ void operator()(gpm::tx_ref tx) const {
    std::uint64_t failed = 0;
    for (std::uint64_t i : tx.workers(count)) {
      const gpm::tx_result r = tx.run([&](auto& t) { insert_body(plan, t, table_plan::key(i)); });
      failed += r.status != gpm::tx_status::committed;
    }
    count_failures(failures, failed);
  }
};

// Checks the table in the heap: every key once, with its value, and the keys found include
// `must` and lie in `may` (both sorted).
void check_keys(const gpm::tx_heap& heap, std::uint64_t words,
                const std::vector<std::uint32_t>& must, const std::vector<std::uint32_t>& may) {
  std::vector<std::uint32_t> w(words);
  heap.load(0, w.data(), w.size());
  std::vector<std::uint32_t> found;
  for (std::uint64_t e = 0; e < w.size() / 2; ++e) {
    const std::uint32_t key = w[2 * e];
    if (key == 0) continue;
    if (w[2 * e + 1] != table_plan::value(key)) {
      check_failed("Hashtable: entry " + std::to_string(e) + " holds key " + std::to_string(key) +
                   " with a wrong value");
    }
    found.push_back(key);
  }
  std::sort(found.begin(), found.end());
  if (std::adjacent_find(found.begin(), found.end()) != found.end()) {
    check_failed("Hashtable: a key is in the table twice");
  }
  if (!std::includes(found.begin(), found.end(), must.begin(), must.end()) ||
      !std::includes(may.begin(), may.end(), found.begin(), found.end())) {
    check_failed("Hashtable: the table holds " + std::to_string(found.size()) + " keys, not " +
                 (must.size() == may.size()
                      ? "the " + std::to_string(must.size()) + " inserted"
                      : "between " + std::to_string(must.size()) + " and " +
                            std::to_string(may.size()) + " of those inserted"));
  }
}

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
    check_keys(heap, words(), complete ? expected_ : std::vector<std::uint32_t>{}, expected_);
  }

 private:
  table_plan plan_;
  std::uint64_t inserts_;
  std::vector<std::uint32_t> expected_;  // the inserted keys, sorted
  failure_counter failures_;
};

// tx_hash_lookup's transactions: i % 10 == 0 inserts a new key; the others look up a preloaded
// key, for odd i one of the first kHotKeys. A lookup that misses its key or reads a wrong value
// counts as a failure.
constexpr std::uint64_t kHotKeys = 1024;

struct lookup_mix {
  table_plan plan;
  std::uint64_t preload;
  std::uint64_t count;
  std::uint64_t* failures;

  GPM_HOST_DEVICE static bool is_insert(std::uint64_t i) { return i % 10 == 0; }
  GPM_HOST_DEVICE static std::uint32_t inserted_key(std::uint64_t preload, std::uint64_t i) {
    return table_plan::key(preload + i / 10);
  }
  GPM_HOST_DEVICE std::uint32_t looked_up_key(std::uint64_t i) const {
    const std::uint64_t range = i % 2 == 1 && kHotKeys < preload ? kHotKeys : preload;
    return table_plan::key(gpm::mix64(i) % range);
  }

  __device__ void operator()(gpm::tx_ref tx) const {
    std::uint64_t failed = 0;
    for (std::uint64_t i : tx.workers(count)) {
      bool found = true;  // the committed attempt's
      const gpm::tx_result r = tx.run([&](auto& t) {
        if (is_insert(i)) return insert_body(plan, t, inserted_key(preload, i));
        const std::uint32_t key = looked_up_key(i);
        const std::uint64_t e = plan.find(key, [&](std::uint64_t x) { return t.read(2 * x); });
        found = e != table_plan::kNoEntry && t.read(2 * e) == key &&
                t.read(2 * e + 1) == table_plan::value(key);
      });
      failed += r.status != gpm::tx_status::committed || !found;
    }
    count_failures(failures, failed);
  }
};

class hash_lookups final : public application {
 public:
  hash_lookups(std::uint64_t preload, std::uint64_t transactions, std::uint64_t base,
               std::uint64_t extended)
      : plan_{base, extended},
        preload_(preload),
        transactions_(transactions),
        image_(2 * (base + extended), 0) {
    for (std::uint64_t k = 0; k < preload; ++k) {
      const std::uint32_t key = table_plan::key(k);
      const std::uint64_t e = plan_.find(key, [&](std::uint64_t x) { return image_[2 * x]; });
      if (e == table_plan::kNoEntry) {
        check_failed("tx_hash_lookup: preloading key " + std::to_string(k) + " found no entry");
      }
      image_[2 * e] = key;
      image_[2 * e + 1] = table_plan::value(key);
      preloaded_.push_back(key);
    }
    all_ = preloaded_;
    for (std::uint64_t i = 0; i < transactions; i += 10) {
      all_.push_back(lookup_mix::inserted_key(preload_, i));
    }
    std::sort(preloaded_.begin(), preloaded_.end());
    std::sort(all_.begin(), all_.end());
  }

  std::uint64_t words() const override { return image_.size(); }
  std::uint64_t transactions() const override { return transactions_; }
  std::uint32_t record_words() const override { return 2; }
  named_counts sizes() const override {
    return {{"preloaded_keys", preload_},
            {"lookups", transactions_ - (transactions_ + 9) / 10},
            {"inserts", (transactions_ + 9) / 10},
            {"hot_keys", kHotKeys},
            {"base_entries", plan_.base},
            {"extended_entries", plan_.extended}};
  }
  void reset(gpm::tx_heap& heap) override { heap.store(0, image_.data(), image_.size()); }
  std::vector<double> run(gpm::tx_heap& heap, launch_shape launch, cudaStream_t s) override {
    return {failures_.timed_launch(
        heap, launch, s, lookup_mix{plan_, preload_, transactions_, failures_.device()},
        "tx_hash_lookup (a lookup that missed its key, or an insert that found no free entry, is "
        "one)")};
  }
  // The preloaded keys and, after a complete repeat, every inserted one; after a recovery, the
  // preloaded keys and some of the inserted ones.
  void check(const gpm::tx_heap& heap, bool complete) override {
    check_keys(heap, words(), complete ? all_ : preloaded_, all_);
  }

 private:
  table_plan plan_;
  std::uint64_t preload_;
  std::uint64_t transactions_;
  std::vector<std::uint32_t> image_;      // the preloaded table
  std::vector<std::uint32_t> preloaded_;  // sorted
  std::vector<std::uint32_t> all_;        // preloaded and inserted, sorted
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

workload tx_hash_lookup_workload() {
  using namespace tx;
  const application_factory make = [](const mode_context& ctx) -> std::unique_ptr<application> {
    return std::make_unique<hash_lookups>(
        scaled(ctx, 900'000, 16, 256), scaled(ctx, 900'000, 16, 256),
        scaled(ctx, 1'000'000, 16, 256), scaled(ctx, 3'000'000, 16, 256));
  };
  workload w{"tx_hash_lookup",
             "read-heavy Hashtable: H2's table preloaded with 900K keys, then 900K transactions, "
             "90% lookups (half of 1,024 hot keys), 10% inserts; locked against versioned reads",
             {ceiling_mode()}};
  for (const char* name : {"volatile", "redo-direct", "helpers"}) {
    const persistence& p = persistence_named(name);
    for (const gpm::tx_reads reads : {gpm::tx_reads::locked, gpm::tx_reads::versioned}) {
      const bool versioned = reads == gpm::tx_reads::versioned;
      w.modes.push_back(
          tx_mode_of(p.name + (versioned ? "-versioned" : ""),
                     p.summary + (versioned ? ", versioned reads" : ", locked reads (the paper's)"),
                     make, {p, paper_launch, kPaperRingEntries, reads}));
    }
  }
  return w;
}

workload tx_hash_h2_workload() {
  return tx::paper_workload(
      "tx_hash_h2",
      "Hashtable H2: 900K inserts into 1M base + 3M extended entries, linear probing (TPDS'20)",
      tx::hash_application(900'000, 1'000'000, 3'000'000));
}

}  // namespace gpmbench
