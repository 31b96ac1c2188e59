// Property tests of gpm::tx against a sequential reference: conditional bank transfers (the
// paper's ATM, whose outcome depends on the order) between few accounts, so transactions
// conflict all the time, over every persistence mode, 1 or 2 helper warps, tile sizes 1, 8 and
// 32, small rings (committers wait for the helpers) and tiny logs (rings that wrap many times
// while the host frees them), HCL-striped records, and the adaptive switch held ON, held OFF or
// flipping every few microseconds, undo logging in place, with locked and with versioned reads,
// each under several emulator schedules.
// Checked every time:
//  - every transaction committed, and the sequence numbers are exactly 1..N;
//  - replaying the transactions one by one in sequence order on the initial state gives the
//    final state exactly (serializable in commit order), and the total balance is unchanged;
//  - everything is durable after sync(), and reopening the heap recovers the same state.
#include <gpm/pool/pool.hpp>
#include <gpm/tx/tx_heap.cuh>

#include <string>

#include "tx_test_support.hpp"

namespace {

using gpm::tx_mode;
using gpm::tx_status;
using namespace gpm::test::tx;

// Adaptive thresholds (bytes/s) with 1 µs slices: every slice that persists anything turns
// helpers on; none ever does; about one record per slice does (so the switch flips all the time).
constexpr double kAlwaysOn = 0, kNeverOn = 1e30, kFlipping = 40e6;

struct config {
  const char* name;
  tx_mode mode;
  std::uint32_t helpers;
  std::uint32_t ring_chunks;
  std::uint64_t log_bytes;
  unsigned tile;
  double threshold = kAlwaysOn;
  bool learn = false;  // adaptive: learn each kernel's faster kind (false: the paper's switch)
  gpm::tx_reads reads = gpm::tx_reads::locked;
};

constexpr gpm::tx_reads kVersioned = gpm::tx_reads::versioned;

const config kConfigs[] = {
    {"volatile", tx_mode::volatile_only, 1, 1024, 4096, 1},
    {"direct", tx_mode::direct, 1, 1024, 4096, 1},
    {"direct_tiny_logs", tx_mode::direct, 1, 1024, 256, 1},
    {"direct_tile32", tx_mode::direct, 1, 1024, 4096, 32},
    {"helpers1", tx_mode::helpers, 1, 1024, 1 << 16, 1},
    {"helpers1_small_ring", tx_mode::helpers, 1, 8, 4096, 1},
    {"helpers2_small_ring_tiny_logs", tx_mode::helpers, 2, 6, 256, 1},
    {"helpers1_tile8_tiny_logs", tx_mode::helpers, 1, 64, 256, 8},
    {"helpers2_tile32_small_ring", tx_mode::helpers, 2, 16, 4096, 32},
    {"hcl", tx_mode::hcl, 1, 1024, 4096, 1},
    {"hcl_tiny_logs", tx_mode::hcl, 1, 1024, 256, 1},
    {"hcl_tile8_tiny_logs", tx_mode::hcl, 1, 1024, 256, 8},
    {"hcl_tile32", tx_mode::hcl, 1, 1024, 4096, 32},
    {"adaptive_on", tx_mode::adaptive, 1, 8, 4096, 1, kAlwaysOn},
    {"adaptive_off_tile8", tx_mode::adaptive, 1, 64, 256, 8, kNeverOn},
    {"adaptive_flipping", tx_mode::adaptive, 1, 16, 1024, 1, kFlipping},
    {"adaptive2_flipping_tile32_tiny_logs", tx_mode::adaptive, 2, 16, 256, 32, kFlipping},
    {"adaptive_learn_tile8", tx_mode::adaptive, 1, 16, 1024, 8, kFlipping, true},
    {"undo", tx_mode::undo, 1, 1024, 4096, 1},
    {"undo_tile32", tx_mode::undo, 1, 1024, 4096, 32},
    {"volatile_versioned", tx_mode::volatile_only, 1, 1024, 4096, 1, kAlwaysOn, false, kVersioned},
    {"direct_versioned", tx_mode::direct, 1, 1024, 4096, 1, kAlwaysOn, false, kVersioned},
    {"helpers1_small_ring_versioned", tx_mode::helpers, 1, 8, 4096, 1, kAlwaysOn, false,
     kVersioned},
    {"helpers2_tile32_versioned", tx_mode::helpers, 2, 16, 4096, 32, kAlwaysOn, false, kVersioned},
    {"hcl_tile8_versioned", tx_mode::hcl, 1, 1024, 256, 8, kAlwaysOn, false, kVersioned},
    {"adaptive_flipping_versioned", tx_mode::adaptive, 1, 16, 1024, 1, kFlipping, false,
     kVersioned},
    {"undo_versioned", tx_mode::undo, 1, 1024, 4096, 1, kAlwaysOn, false, kVersioned},
};

class TxProperty : public ::testing::TestWithParam<config> {};

template <unsigned G>
void run_half(gpm::tx_heap& heap, const atm& w, std::uint64_t first, std::uint64_t count,
              outcome_arrays out) {
  launch_atm<G>(heap, w, first, count, 4, 64, out);
}

void run_all(const config& c, gpm::tx_heap& heap, const atm& w, outcome_arrays out) {
  // Two launches, so the second continues each block's log stream where the first left it.
  const std::uint64_t half = w.transactions / 2;
  for (const auto& [first, count] :
       {std::pair{std::uint64_t{0}, half}, std::pair{half, w.transactions - half}}) {
    switch (c.tile) {
      case 1: run_half<1>(heap, w, first, count, out); break;
      case 8: run_half<8>(heap, w, first, count, out); break;
      default: run_half<32>(heap, w, first, count, out); break;
    }
  }
  heap.sync();
}

TEST_P(TxProperty, CommitsAreSerializableInSequenceOrderAndDurable) {
  const config& c = GetParam();
  gpm::test::scratch_pool pool("tx-prop");
  gpm::tx_options o;
  o.mode = c.mode;
  o.reads = c.reads;
  o.helper_warps = c.helpers;
  o.ring_chunks = c.ring_chunks;
  o.max_threads = 4 * 64;
  o.switch_threshold = c.threshold;
  o.learn = c.learn;
  o.slice_us = 1;
  std::uint64_t flipping_switches = 0;  // adaptive with kFlipping: switches over the seeds' runs
  for (const std::uint64_t seed : {0, 1, 2}) {
    SCOPED_TRACE(std::string(c.name) + ", emulator seed " + std::to_string(seed));
    const atm w{.accounts = 12, .transactions = 1200, .seed = seed + 100};
    const std::string name = "bank" + std::to_string(seed);
    const gpm::tx_geometry g{.words = w.words(), .logs = 4, .log_bytes = c.log_bytes};
    std::vector<std::uint32_t> state(w.words());
    {
      auto heap = gpm::tx_heap::create(pool.get(), name, g, o);
      const std::vector<std::uint32_t> initial = w.initial(40);
      heap.store(0, initial.data(), initial.size());
      gpm::device_buffer<std::uint64_t> seq(w.transactions);
      gpm::device_buffer<tx_status> status(w.transactions);
      with_schedule(seed, [&] { run_all(c, heap, w, {seq.data(), status.data()}); });
      heap.load(0, state.data(), state.size());

      for (const tx_status s : gpm::test::to_host(status)) {
        ASSERT_EQ(s, tx_status::committed) << gpm::to_string(s);
      }
      std::uint64_t total = 0;
      for (std::uint32_t a = 0; a < w.accounts; ++a) total += state[a];
      EXPECT_EQ(total, 40u * w.accounts);
      for (std::uint64_t i = 0; i < w.transactions; ++i) {
        ASSERT_TRUE(state[w.accounts + i] == 1 || state[w.accounts + i] == 2) << i;
      }
      // Every worker runs a transaction per round, an empty one when it has no transfer left.
      const gpm::tx_stats stats = heap.stats();
      EXPECT_EQ(stats.commits, 2 * 3 * 256u);
      if (c.mode == tx_mode::volatile_only) {
        EXPECT_EQ(heap.durable_seq(), 0u);
        continue;
      }
      const std::vector<std::uint64_t> seqs = gpm::test::to_host(seq);
      const std::vector<std::uint64_t> order = by_seq(seqs);
      ASSERT_EQ(order.size(), w.transactions);
      for (std::uint64_t k = 0; k < order.size(); ++k) {
        ASSERT_EQ(seqs[order[k]], k + 1) << "sequence numbers are 1..N without holes";
      }
      std::vector<std::uint32_t> replay = initial;
      for (const std::uint64_t i : order) w.apply(replay, i);
      ASSERT_EQ(replay, state) << "replaying in sequence order must give the final state";
      EXPECT_EQ(heap.durable_seq(), w.transactions);
      EXPECT_EQ(stats.durable_seq, w.transactions);
      EXPECT_GT(stats.persisted_bytes, w.transactions * 2 * gpm::detail::tx::kChunkBytes);
      EXPECT_EQ(stats.launches, 2u);
      if (c.mode == tx_mode::helpers) {
        EXPECT_EQ(stats.ring_commits, w.transactions);
      }
      if (c.mode == tx_mode::direct || c.mode == tx_mode::hcl || c.mode == tx_mode::undo) {
        EXPECT_EQ(stats.ring_commits, 0u);
      }
      if (c.mode == tx_mode::adaptive && c.learn) {
        // The first launch measures the ring with helpers held on; the second, planned before
        // the first finished, measures it again or, when the first was measured, direct commits.
        EXPECT_GE(stats.ring_launches, 1u);
        EXPECT_GT(stats.ring_commits, 0u);
      } else if (c.mode == tx_mode::adaptive) {
        // The first launch always gets the ring; the second after a hot first one.
        EXPECT_GE(stats.ring_launches, 1u);
        EXPECT_LE(stats.ring_commits, w.transactions);
        if (c.threshold == kNeverOn) {
          EXPECT_EQ(stats.ring_commits, 0u);
          EXPECT_EQ(stats.slices_on, 0u);
        }
        if (c.threshold == kAlwaysOn) {
          EXPECT_EQ(stats.ring_launches, 2u);
          EXPECT_GT(stats.ring_commits, 0u);
          EXPECT_GT(stats.slices_on, 0u);
        }
        if (c.threshold == kFlipping) flipping_switches += stats.switches;
      }
    }
    if (c.mode == tx_mode::volatile_only) continue;
    auto again = gpm::tx_heap::open(pool.get(), name, g, o);
    EXPECT_EQ(again.last_recovery().applied_seq, w.transactions);
    std::vector<std::uint32_t> recovered(w.words());
    again.load(0, recovered.data(), recovered.size());
    EXPECT_EQ(recovered, state);
  }
  if (GPM_BACKEND_HOST && c.threshold == kFlipping && !c.learn) {
    // Turned off as well as on within a launch: the slices are reported while every commit goes
    // through the ring (committers report what the helpers persisted), not only by direct
    // commits. Reported by direct commits alone, each launch switches at most once: at most 6
    // over the three seeds' two launches. On the emulator, whose 1 us slices are mostly idle (a
    // GPU may persist in every slice); one seed's run switched 2 to over 200 times there, so a
    // bound per run (3) failed about one run in seven.
    EXPECT_GE(flipping_switches, 7u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TxProperty, ::testing::ValuesIn(kConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
