// Unit tests of the gpKVS workload's pieces (bench/workloads/kvs): the table's format and its
// validation, the batch kernels against the host reference under every undo policy, the CPU
// implementation, GETs, evictions, and undoing a batch through each log (HCL, conventional,
// flat). The crash tests are in kvs_crash_test.cu.
#include <cstring>
#include <vector>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/error.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "kvs_test_support.hpp"
#include "workloads/common/ndp_log_ahead.hpp"
#include "workloads/common/object_header.hpp"
#include "workloads/common/undo_logs.cuh"
#include "workloads/kvs/kvs_cpu.hpp"

namespace {

using namespace gpm::test::kvs;
using gpmbench::conv_undo;
using gpmbench::flat_undo;
using gpmbench::hcl_undo;
using gpmbench::no_undo;
using gpmbench::undo_of;

constexpr std::uint64_t kUniverse = 2048;
constexpr std::uint64_t kBuckets = 2048;  // one key per bucket on average: no evictions
constexpr std::uint64_t kOps = 1024;

class KvsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fits_without_eviction(kUniverse, kBuckets));
    pool_.emplace(gpm::pool::create("kvs.pool", 64 << 20, kLayout,
                                    options_in(dirs_.pm_dir(), dirs_.snapshot_dir())));
    table_.emplace(table::create(*pool_, "kvs", kBuckets));
  }
  std::vector<bucket> copy_of_table() const {
    const table_view h = table_->host();
    return std::vector<bucket>(h.buckets, h.buckets + h.count);
  }
  bool table_equals(const std::vector<bucket>& b) const {
    return std::memcmp(table_->host().buckets, b.data(), b.size() * sizeof(bucket)) == 0;
  }

  gpm::test::scratch_dirs dirs_{"kvs-unit"};
  std::optional<gpm::pool> pool_;
  std::optional<table> table_;
  batch_scratch scratch_{kBuckets};
};

op_stream sets_only() { return {gpmbench::zipf_distribution(kUniverse, 0), 7, 100}; }
op_stream mixed() { return {gpmbench::zipf_distribution(kUniverse, 0.99), 9, 5}; }

// ---- format ----------------------------------------------------------------------------------

TEST_F(KvsTest, OpenValidatesTheHeader) {
  EXPECT_EQ(table::open(*pool_, "kvs").buckets(), kBuckets);
  const auto code_of = [&](std::string_view name) {
    try {
      table::open(*pool_, name);
    } catch (const gpm::error& e) {
      return e.code();
    }
    return gpm::errc::invalid_argument;  // opened: not what any caller below expects
  };
  EXPECT_EQ(code_of("missing"), gpm::errc::not_found);
  // Another structure's object: not this kind of structure (the common validator's corrupt).
  gpmbench::create_with_header(*pool_, "other", 64, gpmbench::bench_kind("other", "NOTKVS01"),
                               {1, 2, 3});
  EXPECT_EQ(code_of("other"), gpm::errc::corrupt);
  // A future format version.
  gpm::format::object_kind future = kTableKind;
  ++future.major;
  gpmbench::create_with_header(*pool_, "future", kBuckets * sizeof(bucket), future,
                               {kBuckets, kWays, 0});
  EXPECT_EQ(code_of("future"), gpm::errc::version);
  // Sizes that the object cannot hold.
  gpmbench::create_with_header(*pool_, "short", 128, kTableKind, {kBuckets, kWays, 0});
  EXPECT_EQ(code_of("short"), gpm::errc::corrupt);
  // A damaged header.
  const std::uint64_t off = pool_->get("kvs").offset;
  pool_->host_ptr<gpmbench::object_header>(off)->sizes[0] ^= 1;
  EXPECT_EQ(code_of("kvs"), gpm::errc::corrupt);
  EXPECT_THROW(table::create(*pool_, "zero", 0), gpm::error);
}

// ---- kernels against the reference ------------------------------------------------------------

template <class MakeUndo>
void run_sets_and_compare(const table& tab, batch_scratch& s, MakeUndo undo_for_batch) {
  const op_stream ops = sets_only();
  reference ref(kUniverse);
  for (std::uint64_t b = 1; b <= 4; ++b) {
    undo_for_batch(b, [&](const auto& undo) { launch_batch(tab.device(), s, undo, ops, b, kOps); });
    ref.apply(ops, b, kOps);
    ASSERT_EQ(ref.compare(tab.host(), 0), "") << "after batch " << b;
  }
  const batch_counters c = s.counters();
  EXPECT_EQ(c.sets, 4 * kOps);
  EXPECT_EQ(c.evictions, 0u);
  EXPECT_EQ(c.log_failures, 0u);
}

TEST_F(KvsTest, SetsWithoutLogMatchTheReference) {
  run_sets_and_compare(*table_, scratch_, [](std::uint64_t, auto run) { run(no_undo{}); });
  EXPECT_EQ(scratch_.counters().logged, 0u);
}

TEST_F(KvsTest, SetsWithHclUndoMatchTheReferenceAndLogEachSlotOnce) {
  gpm::undo_tx tx =
      gpm::undo_tx::create(*pool_, "undo", {kBlocks, kThreads, hcl_bytes_per_thread(kOps)});
  run_sets_and_compare(*table_, scratch_, [&](std::uint64_t, auto run) {
    tx.begin();
    run(hcl_undo{tx.ref()});
    tx.commit();
  });
  // Uniform keys repeat within a batch: fewer entries than SETs, one per distinct slot.
  const batch_counters c = scratch_.counters();
  EXPECT_GT(c.logged, 0u);
  EXPECT_LT(c.logged, c.sets);
}

TEST_F(KvsTest, SetsWithConventionalUndoMatchTheReference) {
  gpm::conv_undo_tx u = gpm::conv_undo_tx::create(*pool_, "undo", {kBlocks, kOps * 64});
  run_sets_and_compare(*table_, scratch_, [&](std::uint64_t, auto run) {
    u.begin();
    run(undo_of(u));
    u.commit();
  });
}

TEST_F(KvsTest, GetsReadValidValuesAndMissOnlyAbsentKeys) {
  const op_stream ops = mixed();
  // Nothing stored before: a GET finds only what a SET of this batch stored.
  launch_batch(table_->device(), scratch_, no_undo{}, ops, 1, kOps);
  batch_counters c = scratch_.counters();
  EXPECT_GT(c.get_misses, 0u);
  EXPECT_LE(c.get_misses + c.sets, kOps);
  EXPECT_EQ(c.bad_gets, 0u);
  // Preloaded (overwriting batch 1): no GET misses, none reads a foreign value.
  gpm::launch(preload, kBlocks, kThreads, 0, nullptr, table_->device(), scratch_.view(), kUniverse,
              scratch_.next_epoch());
  gpm::test::sync_ok();
  scratch_.reset_counters();
  for (std::uint64_t b = 2; b < 6; ++b)
    launch_batch(table_->device(), scratch_, no_undo{}, ops, b, kOps);
  c = scratch_.counters();
  EXPECT_EQ(c.get_misses, 0u);
  EXPECT_EQ(c.bad_gets, 0u);
  EXPECT_GT(c.sets, 0u);
  reference ref(kUniverse);
  ref.preload(0);
  for (std::uint64_t b = 2; b < 6; ++b) ref.apply(ops, b, kOps);
  EXPECT_EQ(ref.compare(table_->host(), 0), "");
}

TEST_F(KvsTest, ReferenceCatchesWrongTables) {
  const op_stream ops = sets_only();
  launch_batch(table_->device(), scratch_, no_undo{}, ops, 1, kOps);
  reference ref(kUniverse);
  ref.apply(ops, 1, kOps);
  ASSERT_EQ(ref.compare(table_->host(), 0), "");
  bucket* b = table_->host().buckets;
  std::uint64_t i = 0;
  while (b[i].ways[0].key == kEmptyKey) ++i;
  const slot saved = b[i].ways[0];
  b[i].ways[0].value ^= 1ull << 50;  // a stale or torn value
  EXPECT_NE(ref.compare(table_->host(), 0), "");
  b[i].ways[0] = {};  // a lost key
  EXPECT_NE(ref.compare(table_->host(), 0), "");
  EXPECT_EQ(ref.compare(table_->host(), 1), "");  // unless one eviction was counted
  b[i].ways[0] = saved;
  b[i].ways[1] = saved;  // a key stored twice
  EXPECT_NE(ref.compare(table_->host(), 0), "");
}

TEST_F(KvsTest, BatchesRunInTheOrderOfTheTable) {
  // order_by_region: every operation once, their home buckets' regions never going back.
  const op_stream ops = mixed();
  scratch_.order_by_region(kBlocks, kThreads, nullptr, table_->device(), ops, 3, kOps);
  gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<std::uint32_t> order(kOps);
  gpm::check_cuda(cudaMemcpy(order.data(), scratch_.view().order, kOps * sizeof(std::uint32_t),
                             cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
  std::vector<bool> seen(kOps, false);
  std::uint64_t previous = 0;
  for (std::uint32_t i : order) {
    ASSERT_LT(i, kOps);
    ASSERT_FALSE(seen[i]) << "operation " << i << " placed twice";
    seen[i] = true;
    const std::uint64_t region = region_of(table_->host(), ops.key(3, i));
    ASSERT_GE(region, previous) << "operation " << i;
    previous = region;
  }
  EXPECT_GT(previous, 0u);
}

TEST_F(KvsTest, FullBucketsEvictAndTheReferenceAllowsIt) {
  // 16 buckets for 2048 keys: every bucket overflows.
  const table small = table::create(*pool_, "small", 16);
  batch_scratch s(16);
  const op_stream ops = sets_only();
  launch_batch(small.device(), s, no_undo{}, ops, 1, kOps);
  const batch_counters c = s.counters();
  EXPECT_GT(c.evictions, 0u);
  reference ref(kUniverse);
  ref.apply(ops, 1, kOps);
  EXPECT_EQ(ref.compare(small.host(), c.evictions), "");
  for (std::uint64_t b = 0; b < 16; ++b) {
    for (const slot& w : small.host().buckets[b].ways) EXPECT_NE(w.key, kEmptyKey);
  }
}

// ---- undoing a batch through each log ---------------------------------------------------------

TEST_F(KvsTest, HclUndoRestoresTheTableBeforeTheBatch) {
  gpm::undo_tx tx =
      gpm::undo_tx::create(*pool_, "undo", {kBlocks, kThreads, hcl_bytes_per_thread(kOps)});
  const op_stream ops = sets_only();
  tx.begin();
  launch_batch(table_->device(), scratch_, hcl_undo{tx.ref()}, ops, 1, kOps);
  tx.commit();
  const std::vector<bucket> before = copy_of_table();
  tx.begin();
  launch_batch(table_->device(), scratch_, hcl_undo{tx.ref()}, ops, 2, kOps);
  ASSERT_FALSE(table_equals(before));
  EXPECT_TRUE(tx.recover());
  EXPECT_TRUE(table_equals(before));
  EXPECT_FALSE(tx.recover());  // nothing left to undo
}

TEST_F(KvsTest, ConventionalUndoRestoresTheTableAndIsIdempotent) {
  gpm::conv_undo_tx u = gpm::conv_undo_tx::create(*pool_, "undo", {kBlocks, kOps * 64});
  const op_stream ops = sets_only();
  u.begin();
  launch_batch(table_->device(), scratch_, undo_of(u), ops, 1, kOps);
  u.commit();
  const std::vector<bucket> before = copy_of_table();
  u.begin();
  EXPECT_THROW(u.begin(), gpm::error);  // one batch at a time
  launch_batch(table_->device(), scratch_, undo_of(u), ops, 2, kOps);
  ASSERT_FALSE(table_equals(before));
  EXPECT_TRUE(u.recover());
  EXPECT_TRUE(table_equals(before));
  EXPECT_FALSE(u.active());
  // Reopened from the pool (after the first handle is gone): the same record and log.
  { const gpm::conv_undo_tx gone = std::move(u); }
  gpm::conv_undo_tx again = gpm::conv_undo_tx::open(*pool_, "undo");
  EXPECT_FALSE(again.recover());
}

TEST_F(KvsTest, NdpLogAheadCoversEveryChangedBucket) {
  flat_undo u = flat_undo::create(*pool_, "undo", 1, kOps, sizeof(bucket));
  const op_stream ops = mixed();
  gpm::launch(preload, kBlocks, kThreads, 0, nullptr, table_->device(), scratch_.view(), kUniverse,
              scratch_.next_epoch());
  gpm::test::sync_ok();
  scratch_.reset_counters();
  const std::vector<bucket> before = copy_of_table();
  u.begin();
  gpm::device_buffer<unsigned long long> used(1);
  gpm::check_cuda(cudaMemset(used.data(), 0, used.bytes()), "cudaMemset");
  gpm::launch(log_home_buckets, kBlocks, kThreads, 0, nullptr, table_->device(), pool_->ref(),
              u.device_entry(0, 0), u.entry_bytes(), ops, 1, kOps, used.data());
  gpm::test::sync_ok();
  const auto logged = gpm::test::to_host(used)[0];
  u.publish(0, logged);
  launch_batch(table_->device(), scratch_, no_undo{}, ops, 1, kOps);
  EXPECT_EQ(logged, scratch_.counters().sets);
  ASSERT_FALSE(table_equals(before));
  EXPECT_TRUE(u.recover());
  EXPECT_TRUE(table_equals(before));
}

TEST_F(KvsTest, NdpLogAheadLogsWritesBackAndCommits) {
  const op_stream ops = sets_only();
  gpmbench::ndp_log_ahead ndp(*pool_, "ahead", kOps, sizeof(bucket));
  const auto log_sets = [&](std::uint64_t b, std::uint64_t count) {
    return
        [&, b, count](unsigned char* entries, std::uint64_t entry_bytes, unsigned long long* used) {
          gpm::launch(log_home_buckets, kBlocks, kThreads, 0, nullptr, table_->device(),
                      pool_->ref(), entries, entry_bytes, ops, b, count, used);
        };
  };
  const std::uint64_t logged = ndp.log(nullptr, log_sets(1, kOps));
  EXPECT_EQ(logged, kOps);  // a SET batch: every operation logs its home bucket
  EXPECT_EQ(ndp.bytes_persisted(), logged * (16 + sizeof(bucket)));  // the entries, written back
  launch_batch(table_->device(), scratch_, no_undo{}, ops, 1, kOps);
  EXPECT_EQ(ndp.write_back_and_commit(logged), logged * sizeof(bucket));
  reference ref(kUniverse);
  ref.apply(ops, 1, kOps);
  EXPECT_EQ(ref.compare(table_->host(), 0), "");
  EXPECT_FALSE(gpmbench::flat_undo::open(*pool_, "ahead").active());  // committed
}

// ---- the CPU implementation -------------------------------------------------------------------

TEST_F(KvsTest, CpuStoreMatchesTheReferenceAndUndoes) {
  gpmbench::cpu_team team(3);
  flat_undo u = flat_undo::create(*pool_, "undo", team.size(), kOps, sizeof(slot));
  cpu_store store(table_->host(), team);
  const op_stream ops = sets_only();
  reference ref(kUniverse);
  std::uint64_t bytes = 0;
  for (std::uint64_t b = 1; b <= 3; ++b) {
    const batch_counters c = store.run_batch(u, ops, b, kOps, bytes);
    EXPECT_EQ(c.sets, kOps);
    ref.apply(ops, b, kOps);
    ASSERT_EQ(ref.compare(table_->host(), 0), "") << "after batch " << b;
  }
  EXPECT_GT(bytes, 3 * kOps * sizeof(slot));
  // An interrupted batch (logged but not committed) is undone by flat_undo::recover.
  const std::vector<bucket> before = copy_of_table();
  u.begin();
  std::uint64_t ignored = 0;
  EXPECT_THROW(store.run_batch(u, ops, 4, kOps, ignored), gpm::error);  // already active
  EXPECT_TRUE(u.recover());
  EXPECT_TRUE(table_equals(before));
}

TEST_F(KvsTest, FlatUndoRejectsBadSizesAndFullRegions) {
  EXPECT_THROW(flat_undo::create(*pool_, "bad", 0, 4, 16), gpm::error);
  EXPECT_THROW(flat_undo::create(*pool_, "bad", 1, 4, 12), gpm::error);
  flat_undo u = flat_undo::create(*pool_, "tiny", 1, 2, 16);
  u.begin();
  slot* s = &table_->host().buckets[0].ways[0];
  u.save(0, s, sizeof *s);
  u.save(0, s + 1, sizeof *s);
  try {
    u.save(0, s + 2, sizeof *s);
    ADD_FAILURE() << "a full region accepted an entry";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::out_of_memory);
  }
  u.commit();
  EXPECT_EQ(flat_undo::open(*pool_, "tiny").capacity(), 2u);
}

}  // namespace
