// Crash tests of gpKVS batches with real process crashes, for every way a mode makes a batch
// failure-atomic: HCL undo (gpm, snapshot), conventional undo (gpm-conv), the CPU-persisted
// log-ahead of gpm-ndp, and the CPU implementation's per-thread flat undo (cpu). A child runs SET
// batches on a table in a pool, recording each committed batch, until it is killed (SIGKILL at a
// random moment, or at a crash point just before a commit). The parent then recovers and checks:
// the table equals the replay of the batches before the interrupted one, or of those and the
// interrupted one, never anything in between; no key is lost or torn. Recovery is idempotent: a
// crash during recovery, then recovery again, gives the same table as recovering once.
// Trials: GPMKIT_CRASH_TRIALS (a few in CI, thousands in the crash-long label).
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "kvs_test_support.hpp"
#include "workloads/common/undo_logs.cuh"
#include "workloads/kvs/kvs_cpu.hpp"

namespace {

using namespace gpm::test::kvs;
using gpmbench::flat_undo;

constexpr std::uint64_t kUniverse = 2048;
constexpr std::uint64_t kBuckets = 2048;
constexpr std::uint64_t kOps = 512;
constexpr unsigned kCpuThreads = 2;

op_stream ops() { return {gpmbench::zipf_distribution(kUniverse, 0), 11, 100}; }

enum class kind { hcl, conv, ndp, cpu };
const char* name_of(kind k) {
  switch (k) {
    case kind::hcl: return "hcl";
    case kind::conv: return "conv";
    case kind::ndp: return "ndp";
    case kind::cpu: return "cpu";
  }
  return "?";
}
const char* recovery_point(kind k) {
  switch (k) {
    case kind::hcl:
    case kind::conv: return "undo_tx.recover.rolled_back";  // undo_tx or conv_undo_tx
    default: return "flat_undo.recover.restored";
  }
}

// The pool's objects, created by the parent, opened by the child and again by the parent. The
// pool sits behind a pointer: the objects below keep its address.
struct store {
  std::unique_ptr<gpm::pool> pool;
  table tab;
  std::uint64_t* committed;  // the last batch whose commit returned
  std::optional<gpm::undo_tx> hcl;
  std::optional<gpm::conv_undo_tx> conv;
  std::optional<flat_undo> flat;

  static store create(const std::string& pm_dir, const std::string& snap_dir, kind k) {
    gpm::pool p = gpm::pool::create("kvs.pool", 32 << 20, kLayout, options_in(pm_dir, snap_dir));
    table::create(p, "kvs", kBuckets);
    p.allocate("committed", sizeof(std::uint64_t));
    switch (k) {
      case kind::hcl:
        gpm::undo_tx::create(p, "undo", {kBlocks, kThreads, hcl_bytes_per_thread(kOps)});
        break;
      case kind::conv: gpm::conv_undo_tx::create(p, "undo", {kBlocks, kOps * 64}); break;
      case kind::ndp: flat_undo::create(p, "undo", 1, kOps, sizeof(bucket)); break;
      case kind::cpu: flat_undo::create(p, "undo", kCpuThreads, kOps, sizeof(slot)); break;
    }
    p.close();
    return open(pm_dir, snap_dir, k);
  }
  static store open(const std::string& pm_dir, const std::string& snap_dir, kind k) {
    auto p = std::make_unique<gpm::pool>(
        gpm::pool::open("kvs.pool", kLayout, options_in(pm_dir, snap_dir)));
    const table t = table::open(*p, "kvs");
    auto* committed = p->host_ptr<std::uint64_t>(p->get("committed").offset);
    store s{std::move(p), t, committed, {}, {}, {}};
    switch (k) {
      case kind::hcl: s.hcl.emplace(gpm::undo_tx::open(*s.pool, "undo")); break;
      case kind::conv: s.conv.emplace(gpm::conv_undo_tx::open(*s.pool, "undo")); break;
      default: s.flat.emplace(flat_undo::open(*s.pool, "undo")); break;
    }
    return s;
  }
  bool recover() {
    if (hcl) return hcl->recover();
    if (conv) return conv->recover();
    return flat->recover();
  }
  bool active() const {
    if (hcl) return hcl->active();
    if (conv) return conv->active();
    return flat->active();
  }
};

// One batch, made durable as the mode of `k` does it.
void run_durable_batch(store& s, kind k, batch_scratch& scratch, gpmbench::kvs::cpu_store& cpu,
                       std::uint64_t b) {
  const op_stream o = ops();
  switch (k) {
    case kind::hcl:
      s.hcl->begin();
      launch_batch(s.tab.device(), scratch, gpmbench::hcl_undo{s.hcl->ref()}, o, b, kOps);
      gpm::crash_point("kvs_test.before_commit");
      s.hcl->commit();
      break;
    case kind::conv:
      s.conv->begin();
      launch_batch(s.tab.device(), scratch, gpmbench::undo_of(*s.conv), o, b, kOps);
      gpm::crash_point("kvs_test.before_commit");
      s.conv->commit();
      break;
    case kind::ndp: {
      s.flat->begin();
      gpm::device_buffer<unsigned long long> used(1);
      gpm::check_cuda(cudaMemset(used.data(), 0, used.bytes()), "cudaMemset");
      gpm::launch(log_home_buckets, kBlocks, kThreads, 0, nullptr, s.tab.device(), s.pool->ref(),
                  s.flat->device_entry(0, 0), s.flat->entry_bytes(), o, b, kOps, used.data());
      const unsigned long long n = gpm::test::to_host(used)[0];
      gpm::write_back(s.flat->host_entry(0, 0), n * s.flat->entry_bytes());
      s.flat->publish(0, n);
      launch_batch(s.tab.device(), scratch, gpmbench::no_undo{}, o, b, kOps);
      s.flat->write_back_targets(0, 0, n);
      gpm::crash_point("kvs_test.before_commit");
      s.flat->commit();
      break;
    }
    case kind::cpu: {
      std::uint64_t bytes = 0;
      cpu.run_batch(*s.flat, o, b, kOps, bytes);  // commits inside; crash points: its saves
      break;
    }
  }
  // Written after the commit: a kill between the two leaves the counter one batch behind, and the
  // resumed child runs the committed batch again. That is harmless here because a SET batch is
  // idempotent (each SET stores value_of(key, batch)); gpDB's UPDATEs are not, and its crash test
  // counts batches inside the transaction instead.
  *s.committed = b;
  gpm::write_back(s.committed, sizeof *s.committed);
}

// The child: recover, then run batches after the last committed one until killed.
int batches_scenario(const gpm::test::scenario_args& a, kind k) {
  store s = store::open(a.pm_dir, a.snapshot_dir, k);
  s.recover();
  batch_scratch scratch(kBuckets);
  gpmbench::cpu_team team(kCpuThreads);
  gpmbench::kvs::cpu_store cpu(s.tab.host(), team);
  gpm::test::report_progress(a, "ready");
  for (std::uint64_t b = *s.committed + 1; b < *s.committed + 100000; ++b) {
    run_durable_batch(s, k, scratch, cpu, b);
  }
  return 0;
}
GPM_CRASH_SCENARIO(kvs_hcl_batches) { return batches_scenario(args, kind::hcl); }
GPM_CRASH_SCENARIO(kvs_conv_batches) { return batches_scenario(args, kind::conv); }
GPM_CRASH_SCENARIO(kvs_ndp_batches) { return batches_scenario(args, kind::ndp); }
GPM_CRASH_SCENARIO(kvs_cpu_batches) { return batches_scenario(args, kind::cpu); }

int recover_scenario(const gpm::test::scenario_args& a, kind k) {
  store s = store::open(a.pm_dir, a.snapshot_dir, k);
  s.recover();
  return 0;
}
GPM_CRASH_SCENARIO(kvs_hcl_recover) { return recover_scenario(args, kind::hcl); }
GPM_CRASH_SCENARIO(kvs_conv_recover) { return recover_scenario(args, kind::conv); }
GPM_CRASH_SCENARIO(kvs_ndp_recover) { return recover_scenario(args, kind::ndp); }
GPM_CRASH_SCENARIO(kvs_cpu_recover) { return recover_scenario(args, kind::cpu); }

std::string scenario(kind k, const char* what) {
  return std::string("kvs_") + name_of(k) + "_" + what;
}

// The invariant: the table is the replay of batches 1..n, or of 1..n+1, n the last committed.
// Returns "" or what is wrong.
std::string check_all_or_nothing(const store& s) {
  const std::uint64_t n = *s.committed;
  reference ref(kUniverse);
  for (std::uint64_t b = 1; b <= n; ++b) ref.apply(ops(), b, kOps);
  const std::string before = ref.compare(s.tab.host(), 0);
  if (before.empty()) return {};
  ref.apply(ops(), n + 1, kOps);
  const std::string after = ref.compare(s.tab.host(), 0);
  if (after.empty()) return {};
  return "after " + std::to_string(n) + " committed batches the table is neither before (" +
         before + ") nor after (" + after + ") batch " + std::to_string(n + 1);
}

class KvsCrash : public ::testing::TestWithParam<kind> {};

TEST_P(KvsCrash, BatchesAreAllOrNothing) {
  ASSERT_TRUE(fits_without_eviction(kUniverse, kBuckets));  // so no key may be missing
  const kind k = GetParam();
  const int trials = gpm::test::crash_trials(8);
  int violations = 0, mid_batch = 0;
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d(std::string("kvs-crash-") + name_of(k));
    store::create(d.pm_dir(), d.snapshot_dir(), k);
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    std::string what = std::string(name_of(k)) + " trial " + std::to_string(t) + " (seed " +
                       std::to_string(seed) + ")";
    // Two crashes in a row: the second child starts by recovering from the first.
    for (int crash = 0; crash < 2; ++crash) {
      gpm::test::kill_policy policy;
      if (k != kind::cpu && (t + crash) % 3 == 2) {
        policy = gpm::test::kill_at("kvs_test.before_commit:" + std::to_string(1 + rng() % 4));
      } else {
        policy = gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 60), "ready");
      }
      const auto r = gpm::test::run_child(scenario(k, "batches"), d.args("kvs.pool", seed), policy);
      ASSERT_TRUE(r.killed) << what << ": " << r.describe();
      store s = store::open(d.pm_dir(), d.snapshot_dir(), k);
      mid_batch += s.active();
      s.recover();
      const std::string problem = check_all_or_nothing(s);
      violations += !problem.empty();
      EXPECT_EQ(problem, "") << what << ", crash " << crash;
    }
  }
  std::printf("[ kvs %s ] %d trials, %d crashes, %d inside a batch, %d violations\n", name_of(k),
              trials, 2 * trials, mid_batch, violations);
}

TEST_P(KvsCrash, RecoveryIsIdempotent) {
  const kind k = GetParam();
  const int trials = gpm::test::crash_trials(2);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d(std::string("kvs-idem-") + name_of(k));
    store::create(d.pm_dir(), d.snapshot_dir(), k);
    const std::uint64_t seed = gpm::test::trial_seed(t);
    // The CPU mode has no crash point of its own inside a batch: a flat_undo save is mid-batch.
    const auto r = gpm::test::run_child(
        scenario(k, "batches"), d.args("kvs.pool", seed),
        k == kind::cpu
            ? gpm::test::kill_after_ms(5 + 10.0 * (t % 8), "ready")
            : gpm::test::kill_at("kvs_test.before_commit:" + std::to_string(2 + t % 16)));
    ASSERT_TRUE(r.killed) << r.describe();
    const bool active = store::open(d.pm_dir(), d.snapshot_dir(), k).active();
    std::filesystem::copy_file(d.pool_path("kvs.pool"), d.pool_path("copy.pool"));
    const auto r2 = gpm::test::run_child(scenario(k, "recover"), d.args("kvs.pool", seed),
                                         gpm::test::kill_at(recovery_point(k)));
    if (active) {
      ASSERT_TRUE(r2.killed) << "recovery did not reach its crash point: " << r2.describe();
    } else {
      ASSERT_EQ(r2.exit_code, 0) << r2.describe();
    }
    const auto recovered = [&] {  // recovers the pool kvs.pool; returns its table and count
      store s = store::open(d.pm_dir(), d.snapshot_dir(), k);
      s.recover();
      EXPECT_EQ(check_all_or_nothing(s), "") << "trial " << t;
      const table_view v = s.tab.host();
      return std::pair(std::vector<bucket>(v.buckets, v.buckets + v.count), *s.committed);
    };
    const auto twice = recovered();  // the crashed recovery, then this one
    std::filesystem::remove(d.pool_path("kvs.pool"));
    std::filesystem::rename(d.pool_path("copy.pool"), d.pool_path("kvs.pool"));
    const auto once = recovered();
    EXPECT_EQ(twice.second, once.second) << "trial " << t;
    EXPECT_EQ(std::memcmp(twice.first.data(), once.first.data(), kBuckets * sizeof(bucket)), 0)
        << "trial " << t << ": recovering twice differs from recovering once";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, KvsCrash,
                         ::testing::Values(kind::hcl, kind::conv, kind::ndp, kind::cpu),
                         [](const auto& info) { return std::string(name_of(info.param)); });

}  // namespace
