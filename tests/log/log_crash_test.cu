// Crash tests of the log module with real process crashes (SIGKILL at random moments and at
// injected crash points), on both backends:
//  - undo transactions over each log (undo_tx on HCL, conv_undo_tx): a child runs undo-logged
//    batches of kernels updating an array in a pool until it is killed; after recover() the array
//    equals its state before or after the interrupted batch, never anything in between;
//  - their recovery is idempotent: a crash during recovery (some threads rolled back, or the
//    mark not yet cleared), then recover() again, gives the same array as one clean recovery;
//  - hcl_log: a child inserts entries of varying sizes until killed; every thread's log then
//    holds exactly the entries it completed, each intact (a torn insert is never returned).
// Trials: GPMKIT_CRASH_TRIALS (tens by default, 1000 in the crash-long label).
#include <gpm/log/hcl_log.cuh>
#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/crash_point.hpp>

#include <filesystem>
#include <random>

#include "scratch_pool.hpp"

namespace {

using gpm::log_status;

constexpr char kLayout[] = "log-crash";
constexpr std::uint32_t kBlocks = 4, kThreads = 64, kElems = 4 * kBlocks * kThreads;
constexpr std::uint32_t kKernelsPerBatch = 3;

gpm::pool_options options_for(const gpm::test::scenario_args& a) {
  return gpm::test::quiet_options(a.pm_dir, a.snapshot_dir);
}

// ---- undo transactions (undo_tx on HCL, conv_undo_tx) ----------------------------------------

// Element i after kernel k of batch b (b >= 1), and before any batch (b = 0).
__host__ __device__ std::uint64_t value_of(std::uint64_t b, std::uint32_t k, std::uint64_t i) {
  return b == 0 ? i * 3 + 1 : gpm::mix64((b * kKernelsPerBatch + k) * 0x100000001b3ull + i);
}
std::uint64_t after_batch(std::uint64_t b, std::uint64_t i) {
  return value_of(b, kKernelsPerBatch - 1, i);
}

// A failed update is recorded in the log's fault record, and commit() then throws.
template <class Log>
__global__ void update_batch(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool, std::uint64_t off,
                             std::uint64_t batch, std::uint32_t k) {
  std::uint64_t* a = pool.ptr<std::uint64_t>(off);
  for (std::uint64_t i : gpm::grid_stride(kElems)) {
    if (tx.update(&a[i], value_of(batch, k, i)) != log_status::ok) return;
  }
}

// The log of each kind, sized alike: 512 bytes for each thread of the batch kernels.
gpm::hcl_geometry undo_shape(gpm::hcl_log*) { return {kBlocks, kThreads, 512}; }
gpm::conv_partitions undo_shape(gpm::conv_log*) { return {kBlocks, 512 * kThreads}; }

template <class Log>
void create_undo_pool(const gpm::test::scratch_dirs& d, const std::string& name) {
  gpm::pool p = gpm::pool::create(name, 4 << 20, kLayout,
                                  gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  gpm::basic_undo_tx<Log>::create(p, "tx", undo_shape(static_cast<Log*>(nullptr)));
  const std::uint64_t off = p.allocate("array", kElems * sizeof(std::uint64_t));
  auto* a = p.host_ptr<std::uint64_t>(off);
  for (std::uint32_t i = 0; i < kElems; ++i) a[i] = value_of(0, 0, i);
  gpm::persist(a, kElems * sizeof(std::uint64_t));
}

// Runs batches until killed.
template <class Log>
int undo_batches(const gpm::test::scenario_args& args) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  auto tx = gpm::basic_undo_tx<Log>::open(p, "tx");
  if (tx.recover()) return 3;  // the parent starts every trial from a clean pool
  const std::uint64_t off = p.get("array").offset;
  gpm::test::report_progress(args, "ready");
  for (;;) {
    tx.begin();
    const std::uint64_t b = tx.committed() + 1;
    for (std::uint32_t k = 0; k < kKernelsPerBatch; ++k) {
      gpm::launch(update_batch<Log>, kBlocks, kThreads, 0, nullptr, tx.ref(), p.ref(), off, b, k);
    }
    tx.commit();  // synchronises; throws (exit != SIGKILL) if any update failed
  }
}
GPM_CRASH_SCENARIO(undo_batches_hcl) { return undo_batches<gpm::hcl_log>(args); }
GPM_CRASH_SCENARIO(undo_batches_conv) { return undo_batches<gpm::conv_log>(args); }

// Recovers, then checks the all-or-nothing invariant. Returns the array for comparisons.
template <class Log>
std::vector<std::uint64_t> recover_and_check(const gpm::test::scratch_dirs& d,
                                             const std::string& name, const std::string& what) {
  gpm::pool p =
      gpm::pool::open(name, kLayout, gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  auto tx = gpm::basic_undo_tx<Log>::open(p, "tx");
  const bool rolled_back = tx.recover();
  EXPECT_FALSE(tx.active()) << what;
  EXPECT_TRUE(tx.log().is_empty()) << what;
  const std::uint64_t b = tx.committed();
  const auto* a = p.host_ptr<std::uint64_t>(p.get("array").offset);
  std::vector<std::uint64_t> out(a, a + kElems);
  std::uint32_t wrong = 0;
  for (std::uint32_t i = 0; i < kElems; ++i) wrong += a[i] != after_batch(b, i);
  EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " elements are neither the state after batch "
                       << b << " nor consistent with it (rolled back: " << rolled_back << ")";
  return out;
}

template <class Log>
bool is_active(const gpm::test::scratch_dirs& d, const std::string& name) {
  gpm::pool p =
      gpm::pool::open(name, kLayout, gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  return gpm::basic_undo_tx<Log>::open(p, "tx").active();
}

// Rolls back a random subset of streams (as a recovery kernel a crash cut short would), then
// dies at the crash point "log_test.partial_recovery".
template <class Log>
__global__ void roll_back_subset(gpm::basic_undo_tx_ref<Log> tx, std::uint64_t seed) {
  if (gpm::mix64(seed ^ gpm::tile_index()) % 2 == 0) tx.roll_back();
}

template <class Log>
int partial_recovery(const gpm::test::scenario_args& args) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  auto tx = gpm::basic_undo_tx<Log>::open(p, "tx");
  // Like recover(), roll back only an active batch: an inactive mark means the log is dead.
  if (tx.active()) {
    gpm::launch(roll_back_subset<Log>, tx.grid(), tx.block(), 0, nullptr, tx.ref(), args.seed);
    gpm::check_cuda(cudaDeviceSynchronize(), "partial recovery");
  }
  gpm::crash_point("log_test.partial_recovery");
  return 4;
}
GPM_CRASH_SCENARIO(partial_recovery_hcl) { return partial_recovery<gpm::hcl_log>(args); }
GPM_CRASH_SCENARIO(partial_recovery_conv) { return partial_recovery<gpm::conv_log>(args); }

template <class Log>
int full_recovery(const gpm::test::scenario_args& args) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  gpm::basic_undo_tx<Log>::open(p, "tx").recover();
  return 5;
}
GPM_CRASH_SCENARIO(full_recovery_hcl) { return full_recovery<gpm::hcl_log>(args); }
GPM_CRASH_SCENARIO(full_recovery_conv) { return full_recovery<gpm::conv_log>(args); }

const char* const kTxCrashPoints[] = {"undo_tx.begin.log_cleared", "undo_tx.commit.unmarked"};

template <class Log>
class UndoCrash : public ::testing::Test {
 protected:
  // The scenario `what` for this log ("undo_batches_hcl", ...).
  static std::string scenario(const std::string& what) {
    return what + (std::is_same_v<Log, gpm::hcl_log> ? "_hcl" : "_conv");
  }
};
using Logs = ::testing::Types<gpm::hcl_log, gpm::conv_log>;
TYPED_TEST_SUITE(UndoCrash, Logs);

TYPED_TEST(UndoCrash, BatchesAreAllOrNothing) {
  const int trials = gpm::test::crash_trials(24);
  int rolled = 0;
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("undo-crash");
    create_undo_pool<TypeParam>(d, "tx.pool");
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    gpm::test::kill_policy policy;
    std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")";
    if (t % 3 != 2) {
      policy = gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 60), "ready");
      what += ", killed at a random time";
    } else {
      const char* point = kTxCrashPoints[(t / 3) % std::size(kTxCrashPoints)];
      policy = gpm::test::kill_at(std::string(point) + ":" + std::to_string(1 + rng() % 6));
      what += std::string(", crash point ") + point;
    }
    const auto r =
        gpm::test::run_child(this->scenario("undo_batches"), d.args("tx.pool", seed), policy);
    ASSERT_TRUE(r.killed) << what << ": " << r.describe();
    rolled += is_active<TypeParam>(d, "tx.pool");
    recover_and_check<TypeParam>(d, "tx.pool", what);
    if (this->HasFailure()) return;
  }
  std::printf("%d trials, %d interrupted batches rolled back\n", trials, rolled);
}

TYPED_TEST(UndoCrash, RecoveryIsIdempotent) {
  const int trials = gpm::test::crash_trials(12);
  const char* const recovery_points[] = {"log_test.partial_recovery", "undo_tx.recover.rolled_back",
                                         "undo_tx.recover.unmarked"};
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("undo-idem");
    create_undo_pool<TypeParam>(d, "tx.pool");
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    const std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")";
    const auto r = gpm::test::run_child(this->scenario("undo_batches"), d.args("tx.pool", seed),
                                        gpm::test::kill_after_ms(5 + rng() % 40, "ready"));
    ASSERT_TRUE(r.killed) << what << ": " << r.describe();
    std::filesystem::copy_file(d.pool_path("tx.pool"), d.pool_path("copy.pool"));
    const char* point = recovery_points[t % std::size(recovery_points)];
    const auto r2 = gpm::test::run_child(
        this->scenario(t % std::size(recovery_points) == 0 ? "partial_recovery" : "full_recovery"),
        d.args("tx.pool", seed), gpm::test::kill_at(point));
    // Recovery reaches its crash points only when there is a batch to undo.
    if (is_active<TypeParam>(d, "copy.pool")) {
      ASSERT_TRUE(r2.killed) << what << ": recovery did not reach " << point << ": "
                             << r2.describe();
    }
    const auto once = recover_and_check<TypeParam>(d, "copy.pool", what + ", recovered once");
    const auto twice = recover_and_check<TypeParam>(d, "tx.pool", what + ", crashed at " + point);
    ASSERT_EQ(once, twice) << what << ": recovery after a crash in recovery differs";
  }
}

// ---- hcl_log inserts --------------------------------------------------------------------------

constexpr std::uint32_t kChurnBlocks = 2, kChurnThreads = 64;

__host__ __device__ std::uint32_t churn_bytes(std::uint64_t t, std::uint32_t j) {
  return 4 * (1 + static_cast<std::uint32_t>((t + j * 7) % 40)) - (j % 3);
}
__host__ __device__ unsigned char churn_byte(std::uint64_t t, std::uint32_t j, std::uint32_t i) {
  return static_cast<unsigned char>(gpm::mix64((t << 40) ^ (std::uint64_t{j} << 20) ^ i));
}

__global__ void churn_insert(gpm::hcl_log_ref log, std::uint32_t j, std::uint32_t* full) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned char buf[160];
  const std::uint32_t n = churn_bytes(t, j);
  for (std::uint32_t i = 0; i < n; ++i) buf[i] = churn_byte(t, j, i);
  if (log.insert(buf, n) == log_status::full) gpm::atomic_ref<std::uint32_t>(*full).store(1);
}

GPM_CRASH_SCENARIO(hcl_churn) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  gpm::hcl_log log = gpm::hcl_log::open(p, "log");
  gpm::device_buffer<std::uint32_t> full(1);
  gpm::test::report_progress(args, "ready");
  for (;;) {
    full.fill_bytes(0);
    log.clear();
    for (std::uint32_t j = 0;; ++j) {
      gpm::launch(churn_insert, log.grid(), log.block(), 0, nullptr, log.ref(), j, full.data());
      std::uint32_t f = 0;
      full.copy_to_host(&f, 1);
      if (f) break;
    }
  }
}

// Each thread checks that its log holds entries 0..m-1 exactly (sizes summing to its used
// bytes), every one intact. bad[t]: 0 if so.
__global__ void churn_verify(gpm::hcl_log_ref log, std::uint32_t* bad) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint64_t used = log.size();
  std::uint64_t sum = 0;
  std::uint32_t m = 0;
  while (sum < used) sum += gpm::hcl_log::entry_footprint(churn_bytes(t, m++));
  bad[t] = 0;
  if (sum != used) {
    bad[t] = 1;
    return;
  }
  unsigned char buf[160];
  for (std::uint32_t j = m; j-- > 0;) {
    const std::uint32_t n = churn_bytes(t, j);
    const log_status st = log.read(buf, n);
    if (st != log_status::ok) {
      bad[t] = 10 + static_cast<std::uint32_t>(st);
      return;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (buf[i] != churn_byte(t, j, i)) {
        bad[t] = 2;
        return;
      }
    }
    log.remove(n);
  }
}

TEST(LogCrash, KilledInsertsLeaveOnlyWholeEntries) {
  const int trials = gpm::test::crash_trials(20);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("hcl-crash");
    {
      gpm::pool p = gpm::pool::create("hcl.pool", 4 << 20, kLayout,
                                      gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
      gpm::hcl_log::create(p, "log", {kChurnBlocks, kChurnThreads, 2048});
    }
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    const std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")";
    const auto r = gpm::test::run_child("hcl_churn", d.args("hcl.pool", seed),
                                        gpm::test::kill_after_ms(1 + rng() % 50, "ready"));
    ASSERT_TRUE(r.killed) << what << ": " << r.describe();
    gpm::pool p = gpm::pool::open("hcl.pool", kLayout,
                                  gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
    gpm::hcl_log log = gpm::hcl_log::open(p, "log");
    gpm::device_buffer<std::uint32_t> bad(kChurnBlocks * kChurnThreads);
    gpm::launch(churn_verify, log.grid(), log.block(), 0, nullptr, log.ref(), bad.data());
    const auto b = gpm::test::statuses(bad);
    for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 0u) << what << ": thread " << i;
    EXPECT_NO_THROW(log.check_faults()) << what;
  }
}

}  // namespace
