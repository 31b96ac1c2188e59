// Unit tests of gpm::undo_tx: commit keeps a batch, recover() undoes an uncommitted one (several
// kernels, repeated updates of one element, unaligned odd-sized ranges), recovery twice is the
// same as once, misuse and failed saves are errors, damaged undo entries stop recovery.
#include <gpm/log/undo_tx.cuh>

#include <cstring>
#include <optional>

#include "log_test_support.hpp"

namespace {

namespace L = gpm::detail::log;
using gpm::log_status;

constexpr std::uint32_t kBlocks = 2, kThreads = 64, kElems = 4 * kBlocks * kThreads;

__host__ __device__ std::uint64_t value_of(std::uint64_t salt, std::uint64_t i) {
  return gpm::mix64(salt * 0x100000001b3ull + i);
}

// Thread t updates elements t, t + T, t + 2T, ... of the array (it owns them).
__global__ void update_array(gpm::undo_tx_ref tx, gpm::pool_ref pool, std::uint64_t off,
                             std::uint32_t n, std::uint64_t salt, std::uint32_t* status) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t T = gridDim.x * blockDim.x;
  std::uint64_t* a = pool.ptr<std::uint64_t>(off);
  status[t] = 0;
  for (std::uint32_t i = t; i < n; i += T) {
    const log_status st = tx.update(&a[i], value_of(salt, i));
    if (st != log_status::ok) {
      status[t] = static_cast<std::uint32_t>(st);
      return;
    }
  }
}

struct odd {
  unsigned char b[13];
};

// Thread t rewrites the 13-byte record at byte 1 + 13 t (unaligned, not a multiple of 4).
__global__ void update_odd(gpm::undo_tx_ref tx, gpm::pool_ref pool, std::uint64_t off,
                           unsigned char fill, std::uint32_t* status) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned char* base = pool.ptr<unsigned char>(off) + 1 + 13 * t;
  status[t] = static_cast<std::uint32_t>(tx.save(base, sizeof(odd)));
  if (status[t] == 0) {
    for (int i = 0; i < 13; ++i) base[i] = static_cast<unsigned char>(fill + i);
    gpm::persist();
  }
}

__global__ void save_outside(gpm::undo_tx_ref tx, std::uint64_t* local, std::uint32_t* status) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  status[t] = static_cast<std::uint32_t>(tx.update(local, std::uint64_t{1}));
}

// Threads 0, 3, 6, ... of each block roll back, as if recovery had crashed midway.
__global__ void roll_back_some(gpm::undo_tx_ref tx) {
  if (threadIdx.x % 3 == 0) tx.roll_back();
}

class UndoTx : public ::testing::Test {
 protected:
  UndoTx() : sp_("undo", 16 << 20), status_(kBlocks * kThreads) {}

  void SetUp() override {
    tx_.emplace(gpm::undo_tx::create(pool(), "tx", {kBlocks, kThreads, 4096}));
    off_ = pool().allocate("array", kElems * sizeof(std::uint64_t));
    set_array(0);
  }
  gpm::pool& pool() { return sp_.get(); }
  gpm::undo_tx& tx() { return *tx_; }
  std::uint64_t* array() { return pool().host_ptr<std::uint64_t>(off_); }
  void set_array(std::uint64_t salt) {
    for (std::uint32_t i = 0; i < kElems; ++i) array()[i] = value_of(salt, i);
  }
  void expect_array(std::uint64_t salt, const std::string& what) {
    for (std::uint32_t i = 0; i < kElems; ++i) {
      ASSERT_EQ(array()[i], value_of(salt, i)) << what << ": element " << i;
    }
  }
  void run_update(std::uint64_t salt) {
    gpm::launch(update_array, tx().grid(), tx().block(), 0, nullptr, tx().ref(), pool().ref(), off_,
                kElems, salt, status_.data());
    for (std::uint32_t s : gpm::test::statuses(status_)) ASSERT_EQ(s, 0u);
  }

  gpm::test::scratch_pool sp_;
  std::optional<gpm::undo_tx> tx_;
  std::uint64_t off_ = 0;
  gpm::device_buffer<std::uint32_t> status_;
};

TEST_F(UndoTx, CommitKeepsTheBatch) {
  EXPECT_FALSE(tx().recover());  // nothing to undo
  tx().begin();
  EXPECT_TRUE(tx().active());
  run_update(1);
  EXPECT_FALSE(tx().log().is_empty());
  tx().commit();
  EXPECT_FALSE(tx().active());
  EXPECT_TRUE(tx().log().is_empty());
  EXPECT_EQ(tx().committed(), 1u);
  expect_array(1, "after commit");
  EXPECT_FALSE(tx().recover());
  expect_array(1, "recover after commit");
}

TEST_F(UndoTx, RecoverUndoesSeveralKernelsOfABatch) {
  tx().begin();
  run_update(1);
  tx().commit();
  tx().begin();
  run_update(2);  // every element is logged three times by its owner: newest-first undo
  run_update(3);
  run_update(4);
  EXPECT_TRUE(tx().recover());
  expect_array(1, "after recover");
  EXPECT_FALSE(tx().active());
  EXPECT_TRUE(tx().log().is_empty());
  EXPECT_FALSE(tx().recover());
  expect_array(1, "second recover");
}

TEST_F(UndoTx, RollingBackTwiceRestoresTheSameBytes) {
  tx().begin();
  run_update(5);
  run_update(6);
  // A crash after some threads rolled back: roll back by hand, then let recover() do it again.
  gpm::launch(roll_back_some, tx().grid(), tx().block(), 0, nullptr, tx().ref());
  gpm::test::sync_ok();
  EXPECT_TRUE(tx().active());
  EXPECT_TRUE(tx().recover());
  expect_array(0, "after partial then full rollback");
}

TEST_F(UndoTx, SurvivesReopen) {
  tx().begin();
  run_update(7);
  tx_.reset();
  sp_.reopen();
  tx_.emplace(gpm::undo_tx::open(pool(), "tx"));
  EXPECT_TRUE(tx().active());
  EXPECT_EQ(tx().committed(), 0u);
  EXPECT_TRUE(tx().recover());
  expect_array(0, "after reopen and recover");
}

TEST_F(UndoTx, UnalignedOddSizedRanges) {
  const std::uint64_t off = pool().allocate("odd", 1 + 13 * kBlocks * kThreads + 3);
  unsigned char* bytes = pool().host_ptr<unsigned char>(off);
  for (std::uint32_t i = 0; i < 1 + 13 * kBlocks * kThreads + 3; ++i) bytes[i] = i * 29 + 1;
  std::vector<unsigned char> before(bytes, bytes + 1 + 13 * kBlocks * kThreads + 3);
  tx().begin();
  for (unsigned char fill : {0x10, 0x80}) {
    gpm::launch(update_odd, tx().grid(), tx().block(), 0, nullptr, tx().ref(), pool().ref(), off,
                fill, status_.data());
    for (std::uint32_t s : gpm::test::statuses(status_)) ASSERT_EQ(s, 0u);
  }
  EXPECT_EQ(bytes[1], 0x80);
  EXPECT_TRUE(tx().recover());
  EXPECT_EQ(std::memcmp(bytes, before.data(), before.size()), 0);
}

TEST_F(UndoTx, MisuseIsAnError) {
  EXPECT_THROW(tx().commit(), gpm::error);
  tx().begin();
  EXPECT_THROW(tx().begin(), gpm::error);
  // A range outside the pool cannot be logged; the batch then refuses to commit.
  gpm::device_buffer<std::uint64_t> local(1);
  gpm::launch(save_outside, tx().grid(), tx().block(), 0, nullptr, tx().ref(), local.data(),
              status_.data());
  for (std::uint32_t s : gpm::test::statuses(status_)) {
    ASSERT_EQ(s, static_cast<std::uint32_t>(log_status::bad_address));
  }
  EXPECT_THROW(tx().commit(), gpm::error);
  EXPECT_TRUE(tx().active());
  EXPECT_TRUE(tx().recover());
  expect_array(0, "after the refused commit");
  EXPECT_THROW(gpm::undo_tx::create(pool(), "tx", {1, 32, 64}), gpm::error);
  EXPECT_THROW(gpm::undo_tx::open(pool(), "array"), gpm::error);
  EXPECT_THROW(gpm::undo_tx::open(pool(), "none"), gpm::error);
}

TEST_F(UndoTx, FullLogFailsTheUpdateAndTheCommit) {
  gpm::undo_tx small = gpm::undo_tx::create(pool(), "small", {kBlocks, kThreads, 64});
  small.begin();
  gpm::launch(update_array, small.grid(), small.block(), 0, nullptr, small.ref(), pool().ref(),
              off_, kElems, std::uint64_t{9}, status_.data());
  // 64 bytes hold one undo entry of 8 bytes (36 with its record and trailer): the second fails.
  for (std::uint32_t s : gpm::test::statuses(status_)) {
    ASSERT_EQ(s, static_cast<std::uint32_t>(log_status::full));
  }
  try {
    small.commit();
    FAIL() << "committed a batch whose updates failed";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::out_of_memory);
  }
  EXPECT_TRUE(small.recover());
  expect_array(0, "after undoing the partial batch");
}

TEST_F(UndoTx, DamagedUndoEntryStopsRecovery) {
  tx().begin();
  run_update(3);
  const auto obj = pool().get("tx.log");
  const auto* head = pool().host_ptr<L::header>(obj.offset);
  pool().host_ptr<char>(obj.offset + head->data_offset)[17 * 4 + 2] ^= 1;  // lane 17, row 0
  try {
    tx().recover();
    FAIL() << "recovery applied a damaged undo entry";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::corrupt) << e.what();
  }
  EXPECT_TRUE(tx().active());  // the batch stays marked: nothing is silently dropped
}

}  // namespace
