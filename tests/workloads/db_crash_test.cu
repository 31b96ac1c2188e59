// Crash tests of gpDB batches with real process crashes (SIGKILL at random moments or at a crash
// point just before a commit): INSERT batches whose row count is logged on a conventional log
// (the gpm mode), and UPDATE batches undo-logged on HCL (gpm) or a conventional log (gpm-conv).
// After recovery the table equals the replay of the committed batches, or of those and the
// interrupted one, never anything in between; recovery is idempotent (a crash during recovery,
// then recovery again, gives the table that recovering once gives).
// Trials: GPMKIT_CRASH_TRIALS (a few in CI, thousands in the crash-long label).
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "workloads/db/db_table.cuh"

namespace {

using namespace gpmbench::db;
using gpmbench::undo_of;

constexpr unsigned kBlocks = 4;
constexpr unsigned kThreads = 64;
constexpr std::uint64_t kRows = 4096;
constexpr std::uint64_t kInsertRows = 64;                      // per INSERT batch
constexpr std::uint64_t kInsertCapacity = 1024 * kInsertRows;  // more batches than a child runs
constexpr char kLayout[] = "db-crash";

// The batch counter is part of each batch: logged through the batch's undo log and updated in the
// same transaction, so after a crash it names exactly the batches whose commit became durable. (A
// counter written after commit() returned would lag a committed batch when the kill fell between
// the two, and the resumed child would apply that batch twice.) Thread 0 of the grid does it; the
// grid is the batch kernels' own, as an HCL log requires.
template <class Undo>
__global__ void count_batch(Undo undo, std::uint64_t* committed, std::uint64_t batch,
                            unsigned long long* failures) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (!undo.save(committed, sizeof *committed)) {
    atomicAdd(failures, 1ull);
    return;
  }
  *committed = batch;
  gpm::persist(committed, sizeof *committed);
}

enum class kind { insert, update_hcl, update_conv };
const char* name_of(kind k) {
  return k == kind::insert ? "insert" : k == kind::update_hcl ? "update_hcl" : "update_conv";
}

gpm::pool_options options_in(const std::string& pm, const std::string& snap) {
  gpm::pool_options o;
  o.pm_dir = pm;
  o.snapshot_dir = snap;
  o.notice = [](const std::string&) {};
  return o;
}

struct store {
  std::unique_ptr<gpm::pool> pool;
  table tab;
  std::uint64_t* committed;         // batches committed (updated inside each batch)
  std::uint64_t* committed_device;  // the same word, as kernels address it
  std::optional<gpm::undo_tx> hcl;
  std::optional<gpm::conv_undo_tx> conv;
  gpm::device_buffer<unsigned long long> counts{2};

  static void create(const std::string& pm, const std::string& snap, kind k) {
    gpm::pool p = gpm::pool::create("db.pool", 16 << 20, kLayout, options_in(pm, snap));
    const table t = table::create(p, "db", k == kind::insert ? kInsertCapacity : kRows);
    p.allocate("committed", 8);
    if (k == kind::update_hcl) {
      gpm::undo_tx::create(p, "undo", {kBlocks, kThreads, 8192});
    } else {
      gpm::conv_undo_tx::create(p, "undo", {kBlocks, 128 << 10});
    }
    if (k != kind::insert) {  // the UPDATEs' table, full from the start
      gpm::launch(insert_rows<true>, kBlocks, kThreads, 0, nullptr, t.device(), 0, kRows);
      gpm::test::sync_ok();
      t.set_rows(kRows);
    }
  }
  static store open(const std::string& pm, const std::string& snap, kind k) {
    auto p = std::make_unique<gpm::pool>(gpm::pool::open("db.pool", kLayout, options_in(pm, snap)));
    const table t = table::open(*p, "db");
    const std::uint64_t at = p->get("committed").offset;
    auto* committed = p->host_ptr<std::uint64_t>(at);
    auto* committed_device = p->ref().ptr<std::uint64_t>(at);
    store s{std::move(p), t, committed, committed_device, {}, {}};
    if (k == kind::update_hcl) {
      s.hcl.emplace(gpm::undo_tx::open(*s.pool, "undo"));
    } else {
      s.conv.emplace(gpm::conv_undo_tx::open(*s.pool, "undo"));
    }
    gpm::check_cuda(cudaMemset(s.counts.data(), 0, s.counts.bytes()), "cudaMemset");
    return s;
  }
  bool recover() { return hcl ? hcl->recover() : conv->recover(); }
  bool active() const { return hcl ? hcl->active() : conv->active(); }

  void run_batch(kind k, std::uint64_t b) {
    if (k == kind::insert) {
      conv->begin();
      gpm::launch(count_batch<gpmbench::conv_undo>, kBlocks, kThreads, 0, nullptr, undo_of(*conv),
                  committed_device, b, counts.data() + 1);
      gpm::launch(insert_rows<true>, kBlocks, kThreads, 0, nullptr, tab.device(),
                  (b - 1) * kInsertRows, kInsertRows);
      gpm::launch(publish_rows<gpmbench::conv_undo>, 1, 1, 0, nullptr, tab.device(), undo_of(*conv),
                  b * kInsertRows, counts.data() + 1);
      gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      gpm::crash_point("db_test.before_commit");
      conv->commit();
    } else if (hcl) {
      hcl->begin();
      const gpmbench::hcl_undo undo{hcl->ref()};
      gpm::launch(count_batch<gpmbench::hcl_undo>, kBlocks, kThreads, 0, nullptr, undo,
                  committed_device, b, counts.data() + 1);
      gpm::launch(update_rows<gpmbench::hcl_undo>, kBlocks, kThreads, 0, nullptr, tab.device(),
                  undo, b, counts.data());
      gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      gpm::crash_point("db_test.before_commit");
      hcl->commit();
    } else {
      conv->begin();
      gpm::launch(count_batch<gpmbench::conv_undo>, kBlocks, kThreads, 0, nullptr, undo_of(*conv),
                  committed_device, b, counts.data() + 1);
      gpm::launch(update_rows<gpmbench::conv_undo>, kBlocks, kThreads, 0, nullptr, tab.device(),
                  undo_of(*conv), b, counts.data());
      gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      gpm::crash_point("db_test.before_commit");
      conv->commit();
    }
    if (*committed != b) throw std::runtime_error("db crash test: batch counter not updated");
  }
};

// The table after n committed batches, or n + 1; "" or what is wrong.
std::string check_all_or_nothing(const store& s, kind k) {
  const std::uint64_t n = *s.committed;
  const auto replay = [&](std::uint64_t batches) {
    return k == kind::insert ? compare_with_replay(s.tab.host(), batches * kInsertRows, 1, 0)
                             : compare_with_replay(s.tab.host(), kRows, 1, batches);
  };
  const std::string before = replay(n);
  if (before.empty()) return {};
  const std::string after = replay(n + 1);
  if (after.empty()) return {};
  return "after " + std::to_string(n) + " committed batches the table is neither before (" +
         before + ") nor after (" + after + ") the next one";
}

int batches_scenario(const gpm::test::scenario_args& a, kind k) {
  store s = store::open(a.pm_dir, a.snapshot_dir, k);
  s.recover();
  gpm::test::report_progress(a, "ready");
  // INSERTs stop when the table is full; the parent kills the child long before.
  const std::uint64_t last = k == kind::insert ? kInsertCapacity / kInsertRows : ~0ull >> 1;
  for (std::uint64_t b = *s.committed + 1; b <= last; ++b) s.run_batch(k, b);
  return 0;
}
int recover_scenario(const gpm::test::scenario_args& a, kind k) {
  store::open(a.pm_dir, a.snapshot_dir, k).recover();
  return 0;
}
GPM_CRASH_SCENARIO(db_insert_batches) { return batches_scenario(args, kind::insert); }
GPM_CRASH_SCENARIO(db_update_hcl_batches) { return batches_scenario(args, kind::update_hcl); }
GPM_CRASH_SCENARIO(db_update_conv_batches) { return batches_scenario(args, kind::update_conv); }
GPM_CRASH_SCENARIO(db_insert_recover) { return recover_scenario(args, kind::insert); }
GPM_CRASH_SCENARIO(db_update_hcl_recover) { return recover_scenario(args, kind::update_hcl); }
GPM_CRASH_SCENARIO(db_update_conv_recover) { return recover_scenario(args, kind::update_conv); }

std::string scenario(kind k, const char* what) {
  return std::string("db_") + name_of(k) + "_" + what;
}

class DbCrash : public ::testing::TestWithParam<kind> {};

TEST_P(DbCrash, BatchesAreAllOrNothing) {
  const kind k = GetParam();
  const int trials = gpm::test::crash_trials(8);
  int violations = 0, mid_batch = 0, crashes = 0;
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d(std::string("db-crash-") + name_of(k));
    store::create(d.pm_dir(), d.snapshot_dir(), k);
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    const std::string what = std::string(name_of(k)) + " trial " + std::to_string(t) + " (seed " +
                             std::to_string(seed) + ")";
    for (int crash = 0; crash < 2; ++crash) {
      const gpm::test::kill_policy policy =
          (t + crash) % 3 == 2
              ? gpm::test::kill_at("db_test.before_commit:" + std::to_string(1 + rng() % 3))
              : gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 40), "ready");
      const auto r = gpm::test::run_child(scenario(k, "batches"), d.args("db.pool", seed), policy);
      if (!r.killed) {  // the INSERTs filled the table before the kill: nothing interrupted
        ASSERT_EQ(r.exit_code, 0) << what << ": " << r.describe();
      }
      crashes += r.killed;
      store s = store::open(d.pm_dir(), d.snapshot_dir(), k);
      mid_batch += s.active();
      s.recover();
      const std::string problem = check_all_or_nothing(s, k);
      violations += !problem.empty();
      EXPECT_EQ(problem, "") << what << ", crash " << crash;
    }
  }
  std::printf("[ db %s ] %d trials, %d crashes, %d inside a batch, %d violations\n", name_of(k),
              trials, crashes, mid_batch, violations);
}

TEST_P(DbCrash, RecoveryIsIdempotent) {
  const kind k = GetParam();
  const char* point = "undo_tx.recover.rolled_back";  // every kind: undo_tx or conv_undo_tx
  const int trials = gpm::test::crash_trials(2);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d(std::string("db-idem-") + name_of(k));
    store::create(d.pm_dir(), d.snapshot_dir(), k);
    const auto r = gpm::test::run_child(
        scenario(k, "batches"), d.args("db.pool", gpm::test::trial_seed(t)),
        gpm::test::kill_at("db_test.before_commit:" + std::to_string(2 + t % 16)));
    ASSERT_TRUE(r.killed) << r.describe();
    std::filesystem::copy_file(d.pool_path("db.pool"), d.pool_path("copy.pool"));
    const auto r2 = gpm::test::run_child(scenario(k, "recover"), d.args("db.pool", 0),
                                         gpm::test::kill_at(point));
    ASSERT_TRUE(r2.killed) << "recovery did not reach its crash point: " << r2.describe();
    const auto recovered = [&] {
      store s = store::open(d.pm_dir(), d.snapshot_dir(), k);
      s.recover();
      EXPECT_EQ(check_all_or_nothing(s, k), "") << "trial " << t;
      const table_view v = s.tab.host();
      return std::pair(std::vector<std::uint64_t>(v.cells, v.cells + v.capacity * kColumns),
                       *v.rows);
    };
    const auto twice = recovered();
    std::filesystem::remove(d.pool_path("db.pool"));
    std::filesystem::rename(d.pool_path("copy.pool"), d.pool_path("db.pool"));
    const auto once = recovered();
    EXPECT_EQ(twice.second, once.second) << "trial " << t;
    EXPECT_TRUE(twice.first == once.first)
        << "trial " << t << ": recovering twice differs from recovering once";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, DbCrash,
                         ::testing::Values(kind::insert, kind::update_hcl, kind::update_conv),
                         [](const auto& info) { return std::string(name_of(info.param)); });

}  // namespace
