// Unit tests of the gpDB workload's pieces (bench/workloads/db): the table's format and its
// validation, INSERT and UPDATE kernels against the host replay, the replay catching wrong
// tables, and undoing an UPDATE through HCL, a conventional log and gpm-ndp's log-ahead.
#include <cstring>
#include <optional>
#include <vector>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/error.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "workloads/db/db_table.cuh"

namespace {

using namespace gpmbench::db;
using gpmbench::flat_undo;
using gpmbench::hcl_undo;
using gpmbench::no_undo;
using gpmbench::undo_of;

constexpr unsigned kBlocks = 4;
constexpr unsigned kThreads = 64;
constexpr std::uint64_t kRows = 4096;

gpm::pool_options options_in(const gpm::test::scratch_dirs& d) {
  gpm::pool_options o;
  o.pm_dir = d.pm_dir();
  o.snapshot_dir = d.snapshot_dir();
  o.notice = [](const std::string&) {};
  return o;
}

class DbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_.emplace(gpm::pool::create("db.pool", 16 << 20, "db-test", options_in(dirs_)));
    table_.emplace(table::create(*pool_, "db", kRows));
    gpm::check_cuda(cudaMemset(failures_.data(), 0, failures_.bytes()), "cudaMemset");
  }
  void insert(std::uint64_t first, std::uint64_t n) {
    gpm::launch(insert_rows<true>, kBlocks, kThreads, 0, nullptr, table_->device(), first, n);
    gpm::launch(publish_rows<no_undo>, 1, 1, 0, nullptr, table_->device(), no_undo{}, first + n,
                failures_.data());
    gpm::test::sync_ok();
  }
  template <class Undo>
  void update(const Undo& undo, std::uint64_t batch) {
    gpm::launch(update_rows<Undo>, kBlocks, kThreads, 0, nullptr, table_->device(), undo, batch,
                failures_.data());
    gpm::test::sync_ok();
  }
  std::vector<std::uint64_t> cells() const {
    const table_view h = table_->host();
    return std::vector<std::uint64_t>(h.cells, h.cells + kRows * kColumns);
  }
  unsigned long long counts(int i) const { return gpm::test::to_host(failures_)[i]; }

  gpm::test::scratch_dirs dirs_{"db-unit"};
  std::optional<gpm::pool> pool_;
  std::optional<table> table_;
  gpm::device_buffer<unsigned long long> failures_{2};
};

TEST_F(DbTest, OpenValidatesTheHeader) {
  EXPECT_EQ(table::open(*pool_, "db").capacity(), kRows);
  const auto code_of = [&](std::string_view name) {
    try {
      table::open(*pool_, name);
    } catch (const gpm::error& e) {
      return e.code();
    }
    return gpm::errc::invalid_argument;  // opened: no caller below expects that
  };
  EXPECT_EQ(code_of("missing"), gpm::errc::not_found);
  // Another structure's object: not this kind of structure (the common validator's corrupt).
  gpmbench::create_with_header(*pool_, "other", 64, gpmbench::bench_kind("other", "NOTGPDB1"),
                               {1, 2, 3});
  EXPECT_EQ(code_of("other"), gpm::errc::corrupt);
  gpm::format::object_kind next = kTableKind;
  ++next.major;
  gpmbench::create_with_header(*pool_, "v3", table::object_bytes(16) - 128, next,
                               {16, kColumns, 0});
  EXPECT_EQ(code_of("v3"), gpm::errc::version);
  gpmbench::create_with_header(*pool_, "short", 256, kTableKind, {kRows, kColumns, 0});
  EXPECT_EQ(code_of("short"), gpm::errc::corrupt);
  // A row count past the capacity.
  table_->set_rows(kRows + 1);
  EXPECT_EQ(code_of("db"), gpm::errc::corrupt);
  table_->set_rows(0);
  pool_->host_ptr<gpmbench::object_header>(pool_->get("db").offset)->sizes[1] = 7;
  EXPECT_EQ(code_of("db"), gpm::errc::corrupt);  // checksum
  EXPECT_THROW(table::create(*pool_, "zero", 0), gpm::error);
}

TEST_F(DbTest, InsertAndUpdateMatchTheReplay) {
  insert(0, kRows / 2);
  EXPECT_EQ(compare_with_replay(table_->host(), kRows / 2, 1, 0), "");
  insert(kRows / 2, kRows / 2);
  EXPECT_EQ(table_->rows(), kRows);
  EXPECT_EQ(compare_with_replay(table_->host(), kRows, 1, 0), "");
  for (std::uint64_t b = 1; b <= 3; ++b) update(no_undo{}, b);
  EXPECT_EQ(compare_with_replay(table_->host(), kRows, 1, 3), "");
  // About kUpdatePercent of the rows per batch.
  EXPECT_GT(counts(0), 3 * kRows * kUpdatePercent / 200);
  EXPECT_LT(counts(0), 3 * kRows * kUpdatePercent * 2 / 100);
}

TEST_F(DbTest, ReplayCatchesWrongTables) {
  insert(0, kRows);
  update(no_undo{}, 1);
  ASSERT_EQ(compare_with_replay(table_->host(), kRows, 1, 1), "");
  EXPECT_NE(compare_with_replay(table_->host(), kRows, 1, 0), "");      // batch 1 missing
  EXPECT_NE(compare_with_replay(table_->host(), kRows - 1, 1, 1), "");  // row count
  *table_->host().cell(2, 17) ^= 1;
  EXPECT_NE(compare_with_replay(table_->host(), kRows, 1, 1), "");
}

TEST_F(DbTest, UndoThroughEachLogRestoresTheTable) {
  insert(0, kRows);
  const std::vector<std::uint64_t> before = cells();
  // HCL (gpm)
  gpm::undo_tx tx = gpm::undo_tx::create(*pool_, "hcl", {kBlocks, kThreads, 4096});
  tx.begin();
  update(hcl_undo{tx.ref()}, 1);
  ASSERT_NE(cells(), before);
  EXPECT_TRUE(tx.recover());
  EXPECT_EQ(cells(), before);
  // conventional (gpm-conv)
  gpm::conv_undo_tx conv = gpm::conv_undo_tx::create(*pool_, "conv", {kBlocks, 64 << 10});
  conv.begin();
  update(undo_of(conv), 2);
  ASSERT_NE(cells(), before);
  EXPECT_TRUE(conv.recover());
  EXPECT_EQ(cells(), before);
  // log-ahead (gpm-ndp)
  flat_undo flat = flat_undo::create(*pool_, "flat", 1, kRows, 8);
  flat.begin();
  gpm::device_buffer<unsigned long long> used(1);
  gpm::check_cuda(cudaMemset(used.data(), 0, used.bytes()), "cudaMemset");
  gpm::launch(log_selected_cells, kBlocks, kThreads, 0, nullptr, table_->device(), pool_->ref(),
              flat.device_entry(0, 0), flat.entry_bytes(), 3, used.data());
  gpm::test::sync_ok();
  flat.publish(0, gpm::test::to_host(used)[0]);
  update(no_undo{}, 3);
  ASSERT_NE(cells(), before);
  EXPECT_TRUE(flat.recover());
  EXPECT_EQ(cells(), before);
  EXPECT_EQ(counts(1), 0u);  // no log was ever full
}

TEST_F(DbTest, CountLoggedInsertIsUndoneWithItsRows) {
  insert(0, kRows / 2);
  gpm::conv_undo_tx meta = gpm::conv_undo_tx::create(*pool_, "meta", {1, 4096});
  meta.begin();
  gpm::launch(insert_rows<true>, kBlocks, kThreads, 0, nullptr, table_->device(), kRows / 2,
              kRows / 2);
  gpm::launch(publish_rows<gpmbench::conv_undo>, 1, 1, 0, nullptr, table_->device(), undo_of(meta),
              kRows, failures_.data());
  gpm::test::sync_ok();
  EXPECT_EQ(table_->rows(), kRows);
  EXPECT_TRUE(meta.recover());  // interrupted before its commit: the rows are not in the table
  EXPECT_EQ(table_->rows(), kRows / 2);
  EXPECT_EQ(compare_with_replay(table_->host(), kRows / 2, 1, 0), "");
}

}  // namespace
