// Unit tests of gpm::basic_undo_tx over both logs (undo_tx on an hcl_log, conv_undo_tx on a
// conv_log), typed over the log: commit keeps a batch, recover() undoes an uncommitted one
// (several kernels, repeated updates of one element, unaligned odd-sized ranges), recovery twice
// is the same as once, misuse and failed saves are errors, damaged undo entries stop recovery,
// opening validates the batch record (old, foreign, damaged), and the sizes the transaction
// reports are what it uses.
#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/checksum.hpp>

#include <cstring>
#include <optional>

#include "scratch_pool.hpp"

namespace {

namespace L = gpm::detail::log;
using gpm::log_status;

constexpr std::uint32_t kBlocks = 2, kThreads = 64, kElems = 4 * kBlocks * kThreads;

__host__ __device__ std::uint64_t value_of(std::uint64_t salt, std::uint64_t i) {
  return gpm::mix64(salt * 0x100000001b3ull + i);
}

// Thread t updates elements t, t + T, t + 2T, ... of the array (it owns them).
template <class Log>
__global__ void update_array(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool, std::uint64_t off,
                             std::uint32_t n, std::uint64_t salt, std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  std::uint64_t* a = pool.ptr<std::uint64_t>(off);
  status[t] = 0;
  for (std::uint64_t i : gpm::grid_stride(n)) {
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
template <class Log>
__global__ void update_odd(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool, std::uint64_t off,
                           unsigned char fill, std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  unsigned char* base = pool.ptr<unsigned char>(off) + 1 + 13 * t;
  status[t] = static_cast<std::uint32_t>(tx.save(base, sizeof(odd)));
  if (status[t] == 0) {
    for (int i = 0; i < 13; ++i) base[i] = static_cast<unsigned char>(fill + i);
    gpm::persist();
  }
}

// Thread t rewrites a range in its own 64 bytes starting 4 (t % 4) bytes in, of 4 (t % 9 + 1)
// + t % 3 bytes: every mix of whole, half and partly gathered 16-byte windows that roll-back's
// wide stores (restore_writer) meet, and bytes after the last whole chunk.
GPM_HOST_DEVICE inline std::uint64_t span_start(std::uint32_t t) { return 64 * t + 4 * (t % 4); }
GPM_HOST_DEVICE inline std::uint32_t span_bytes(std::uint32_t t) { return 4 * (t % 9 + 1) + t % 3; }

template <class Log>
__global__ void update_span(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool, std::uint64_t off,
                            unsigned char fill, std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  unsigned char* base = pool.ptr<unsigned char>(off) + span_start(t);
  status[t] = static_cast<std::uint32_t>(tx.save(base, span_bytes(t)));
  if (status[t] == 0) {
    for (std::uint32_t i = 0; i < span_bytes(t); ++i)
      base[i] = static_cast<unsigned char>(fill + i);
    gpm::persist();
  }
}

// Thread t saves and rewrites, in its own 320 bytes, a 300-byte range, a word inside it, the
// range again and its last word: entries longer than one of recovery's copy steps (16 HCL rows,
// 1024 chunks of a partition; undo_tx.cu) between short ones, bytes saved by several entries.
GPM_HOST_DEVICE inline std::uint64_t large_start(std::uint32_t t) { return 320 * t; }

template <class Log>
__global__ void update_large(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool,
                             std::uint64_t off, std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  unsigned char* base = pool.ptr<unsigned char>(off) + large_start(t);
  const struct {
    std::uint32_t at, bytes;
  } steps[] = {{0, 300}, {100, 4}, {0, 300}, {296, 4}};
  status[t] = 0;
  for (std::uint32_t k = 0; k < 4; ++k) {
    const log_status st = tx.save(base + steps[k].at, steps[k].bytes);
    if (st != log_status::ok) {
      status[t] = static_cast<std::uint32_t>(st);
      return;
    }
    for (std::uint32_t i = 0; i < steps[k].bytes; ++i) {
      base[steps[k].at + i] = static_cast<unsigned char>(0x40 * (k + 1) + i);
    }
    gpm::persist();
  }
}

template <class Log>
__global__ void save_outside(gpm::basic_undo_tx_ref<Log> tx, std::uint64_t* local,
                             std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  status[t] = static_cast<std::uint32_t>(tx.update(local, std::uint64_t{1}));
}

// Threads 0, 3, 6, ... of each block roll back, as if recovery had crashed midway.
template <class Log>
__global__ void roll_back_some(gpm::basic_undo_tx_ref<Log> tx) {
  if (threadIdx.x % 3 == 0) tx.roll_back();
}

// What differs between the logs in these tests: the shape of a log giving each thread of a
// (kBlocks, kThreads) kernel `bytes` bytes (a conv_undo_tx has a partition per block), and the
// log bytes in use.
template <class Log>
struct log_kind;
template <>
struct log_kind<gpm::hcl_log> {
  static gpm::hcl_geometry shape(std::uint64_t bytes) { return {kBlocks, kThreads, bytes}; }
  static std::uint64_t used(const gpm::hcl_log& log) {
    std::uint64_t sum = 0;
    for (std::uint32_t b = 0; b < kBlocks; ++b) {
      for (std::uint32_t t = 0; t < kThreads; ++t) sum += log.size(b, t);
    }
    return sum;
  }
};
template <>
struct log_kind<gpm::conv_log> {
  static gpm::conv_partitions shape(std::uint64_t bytes) { return {kBlocks, bytes * kThreads}; }
  static std::uint64_t used(const gpm::conv_log& log) {
    std::uint64_t sum = 0;
    for (std::uint32_t p = 0; p < log.partitions(); ++p) sum += log.size(p);
    return sum;
  }
};

template <class Log>
class UndoTx : public ::testing::Test {
 protected:
  using tx_type = gpm::basic_undo_tx<Log>;
  using kind = log_kind<Log>;

  UndoTx() : sp_("undo", 16 << 20), status_(kBlocks * kThreads) {}

  void SetUp() override {
    tx_.emplace(tx_type::create(pool(), "tx", kind::shape(4096)));
    off_ = pool().allocate("array", kElems * sizeof(std::uint64_t));
    set_array(0);
  }
  gpm::pool& pool() { return sp_.get(); }
  tx_type& tx() { return *tx_; }
  std::uint64_t* array() { return sp_.get().template host_ptr<std::uint64_t>(off_); }
  void set_array(std::uint64_t salt) {
    for (std::uint32_t i = 0; i < kElems; ++i) array()[i] = value_of(salt, i);
  }
  void expect_array(std::uint64_t salt, const std::string& what) {
    for (std::uint32_t i = 0; i < kElems; ++i) {
      ASSERT_EQ(array()[i], value_of(salt, i)) << what << ": element " << i;
    }
  }
  // Logging kernels run with (kBlocks, kThreads): an undo_tx's geometry.
  void launch_update(const tx_type& tx, std::uint64_t salt, std::uint32_t n = kElems) {
    gpm::launch(update_array<Log>, kBlocks, kThreads, 0, nullptr, tx.ref(), pool().ref(), off_, n,
                salt, status_.data());
  }
  void run_update(std::uint64_t salt) {
    launch_update(tx(), salt);
    for (std::uint32_t s : gpm::test::statuses(status_)) ASSERT_EQ(s, 0u);
  }
  // A new object of `size` patterned bytes (`seed`), a batch that changes it (`batch(offset)`:
  // kernels leaving their statuses in status_, all of which must be ok; then `changed(bytes)`
  // checks the change), recover(): the bytes are the pattern again.
  template <class Batch, class Changed>
  void expect_undone(const char* name, std::uint64_t size, unsigned seed, Batch&& batch,
                     Changed&& changed) {
    const std::uint64_t off = pool().allocate(name, size);
    unsigned char* bytes = pool().template host_ptr<unsigned char>(off);
    for (std::uint64_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * seed + 7);
    const std::vector<unsigned char> before(bytes, bytes + size);
    tx().begin();
    batch(off);
    for (std::uint32_t s : gpm::test::statuses(status_)) ASSERT_EQ(s, 0u);
    changed(bytes);
    EXPECT_TRUE(tx().recover());
    for (std::uint64_t i = 0; i < size; ++i) {
      ASSERT_EQ(bytes[i], before[i]) << "byte " << i << " of '" << name << "'";
    }
  }

  gpm::test::scratch_pool sp_;
  std::optional<tx_type> tx_;
  std::uint64_t off_ = 0;
  gpm::device_buffer<std::uint32_t> status_;
};

using Logs = ::testing::Types<gpm::hcl_log, gpm::conv_log>;
TYPED_TEST_SUITE(UndoTx, Logs);

TYPED_TEST(UndoTx, CommitKeepsTheBatch) {
  EXPECT_FALSE(this->tx().recover());  // nothing to undo
  this->tx().begin();
  EXPECT_TRUE(this->tx().active());
  this->run_update(1);
  EXPECT_FALSE(this->tx().log().is_empty());
  this->tx().commit();
  EXPECT_FALSE(this->tx().active());
  EXPECT_TRUE(this->tx().log().is_empty());
  EXPECT_EQ(this->tx().committed(), 1u);
  this->expect_array(1, "after commit");
  EXPECT_FALSE(this->tx().recover());
  this->expect_array(1, "recover after commit");
}

TYPED_TEST(UndoTx, RecoverUndoesSeveralKernelsOfABatch) {
  this->tx().begin();
  this->run_update(1);
  this->tx().commit();
  this->tx().begin();
  this->run_update(2);  // every element is logged three times by its owner: newest-first undo
  this->run_update(3);
  this->run_update(4);
  EXPECT_TRUE(this->tx().recover());
  this->expect_array(1, "after recover");
  EXPECT_FALSE(this->tx().active());
  EXPECT_TRUE(this->tx().log().is_empty());
  // What the recovery did, phase by phase: the entries read from a copy in GPU memory.
  const gpm::undo_recovery undone = this->tx().last_recovery();
  EXPECT_TRUE(undone.undone);
  EXPECT_TRUE(undone.from_copy);
  EXPECT_GT(undone.allocate_seconds, 0);
  EXPECT_GT(undone.kernel_seconds, 0);
  EXPECT_GE(undone.seconds, undone.allocate_seconds + undone.kernel_seconds);
  EXPECT_FALSE(this->tx().recover());
  this->expect_array(1, "second recover");
  const gpm::undo_recovery nothing = this->tx().last_recovery();
  EXPECT_FALSE(nothing.undone);
  EXPECT_EQ(nothing.allocate_seconds, 0);
  EXPECT_EQ(nothing.kernel_seconds, 0);
  // Another interrupted batch, of other values: its recovery reads the kept copy, which still
  // holds the first batch's lines.
  this->tx().begin();
  this->run_update(5);
  EXPECT_TRUE(this->tx().recover());
  this->expect_array(1, "after recovering a second batch");
  EXPECT_TRUE(this->tx().last_recovery().from_copy);
}

TYPED_TEST(UndoTx, RollingBackTwiceRestoresTheSameBytes) {
  this->tx().begin();
  this->run_update(5);
  this->run_update(6);
  // A crash after some threads rolled back: roll back by hand, then let recover() do it again.
  gpm::launch(roll_back_some<TypeParam>, this->tx().grid(), this->tx().block(), 0, nullptr,
              this->tx().ref());
  gpm::test::sync_ok();
  EXPECT_TRUE(this->tx().active());
  EXPECT_TRUE(this->tx().recover());
  this->expect_array(0, "after partial then full rollback");
}

TYPED_TEST(UndoTx, SurvivesReopen) {
  this->tx().begin();
  this->run_update(7);
  this->tx_.reset();
  this->sp_.reopen();
  this->tx_.emplace(TestFixture::tx_type::open(this->pool(), "tx"));
  EXPECT_TRUE(this->tx().active());
  EXPECT_EQ(this->tx().committed(), 0u);
  EXPECT_TRUE(this->tx().recover());
  this->expect_array(0, "after reopen and recover");
}

TYPED_TEST(UndoTx, UnalignedOddSizedRanges) {
  this->expect_undone(
      "odd", 1 + 13 * kBlocks * kThreads + 3, 29,
      [&](std::uint64_t off) {
        for (unsigned char fill : {0x10, 0x80}) {
          gpm::launch(update_odd<TypeParam>, kBlocks, kThreads, 0, nullptr, this->tx().ref(),
                      this->pool().ref(), off, fill, this->status_.data());
          for (std::uint32_t s : gpm::test::statuses(this->status_)) ASSERT_EQ(s, 0u);
        }
      },
      [](const unsigned char* bytes) { EXPECT_EQ(bytes[1], 0x80); });
}

TYPED_TEST(UndoTx, RangesOfEveryAlignmentAndLength) {
  this->expect_undone(
      "spans", 64 * std::uint64_t{kBlocks} * kThreads, 31,
      [&](std::uint64_t off) {
        gpm::launch(update_span<TypeParam>, kBlocks, kThreads, 0, nullptr, this->tx().ref(),
                    this->pool().ref(), off, 0xa0, this->status_.data());
      },
      [](const unsigned char* bytes) { ASSERT_EQ(bytes[span_start(5)], 0xa0); });
}

TYPED_TEST(UndoTx, EntriesLongerThanACopyStep) {
  this->expect_undone(
      "large", large_start(kBlocks * kThreads), 7,
      [&](std::uint64_t off) {
        gpm::launch(update_large<TypeParam>, kBlocks, kThreads, 0, nullptr, this->tx().ref(),
                    this->pool().ref(), off, this->status_.data());
      },
      [](const unsigned char* bytes) {
        ASSERT_EQ(bytes[large_start(7) + 296], 0x00);  // the last step's byte 0: 0x40 * 4
        ASSERT_EQ(bytes[large_start(7) + 100], 0xc0 + 100 - 256);  // the range's second write
      });
}

TYPED_TEST(UndoTx, MisuseIsAnError) {
  EXPECT_THROW(this->tx().commit(), gpm::error);
  this->tx().begin();
  EXPECT_THROW(this->tx().begin(), gpm::error);
  // A range outside the pool cannot be logged; the batch then refuses to commit.
  gpm::device_buffer<std::uint64_t> local(1);
  gpm::launch(save_outside<TypeParam>, kBlocks, kThreads, 0, nullptr, this->tx().ref(),
              local.data(), this->status_.data());
  for (std::uint32_t s : gpm::test::statuses(this->status_)) {
    ASSERT_EQ(s, static_cast<std::uint32_t>(log_status::bad_address));
  }
  EXPECT_THROW(this->tx().commit(), gpm::error);
  EXPECT_TRUE(this->tx().active());
  EXPECT_TRUE(this->tx().recover());
  this->expect_array(0, "after the refused commit");
  using tx_type = typename TestFixture::tx_type;
  EXPECT_THROW(tx_type::create(this->pool(), "tx", TestFixture::kind::shape(64)), gpm::error);
  EXPECT_THROW(tx_type::open(this->pool(), "array"), gpm::error);
  EXPECT_THROW(tx_type::open(this->pool(), "none"), gpm::error);
}

TYPED_TEST(UndoTx, FullLogFailsTheUpdateAndTheCommit) {
  auto small = TestFixture::tx_type::create(this->pool(), "small", TestFixture::kind::shape(64));
  small.begin();
  this->launch_update(small, 9);
  // 64 bytes hold one undo entry of 8 bytes (36 with its record and trailer): the second fails.
  // A partition of 64 bytes a thread fills up in whatever order the block's threads take it:
  // some threads may have made all their updates, the others failed with `full`.
  std::uint32_t full = 0;
  for (std::uint32_t s : gpm::test::statuses(this->status_)) {
    if (std::is_same_v<TypeParam, gpm::hcl_log> || s != 0) {
      ASSERT_EQ(s, static_cast<std::uint32_t>(log_status::full));
    }
    full += s != 0;
  }
  EXPECT_GT(full, 0u);
  try {
    small.commit();
    FAIL() << "committed a batch whose updates failed";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::out_of_memory);
  }
  EXPECT_TRUE(small.recover());
  this->expect_array(0, "after undoing the partial batch");
}

TYPED_TEST(UndoTx, DamagedUndoEntryStopsRecovery) {
  this->tx().begin();
  this->run_update(3);
  gpm::pool& pool = this->pool();
  const auto obj = pool.get("tx.log");
  const auto* head = pool.host_ptr<L::header>(obj.offset);
  pool.host_ptr<char>(obj.offset + head->data_offset)[17 * 4 + 2] ^= 1;
  // hcl: chunk 0 of lane 17's first entry; conv: the checksum of partition 0's second entry.
  try {
    this->tx().recover();
    FAIL() << "recovery applied a damaged undo entry";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::corrupt) << e.what();
  }
  EXPECT_TRUE(this->tx().active());  // the batch stays marked: nothing is silently dropped
}

TYPED_TEST(UndoTx, SizesAreWhatItUses) {
  using tx_type = typename TestFixture::tx_type;
  // Each thread saves one 8-byte element.
  this->tx().begin();
  this->launch_update(this->tx(), 1, kBlocks * kThreads);
  for (std::uint32_t s : gpm::test::statuses(this->status_)) ASSERT_EQ(s, 0u);
  EXPECT_EQ(TestFixture::kind::used(this->tx().log()),
            kBlocks * kThreads * tx_type::entry_footprint(sizeof(std::uint64_t)));
  EXPECT_EQ(tx_type::entry_footprint(8), TypeParam::entry_footprint(16 + 8));
  this->tx().commit();
  // The batch record and the log are the pool objects object_bytes counts.
  EXPECT_EQ(tx_type::object_bytes(TestFixture::kind::shape(4096)),
            this->pool().get("tx").bytes + this->pool().get("tx.log").bytes);
}

TYPED_TEST(UndoTx, OpeningWithTheOtherLogIsAnError) {
  using other =
      std::conditional_t<std::is_same_v<TypeParam, gpm::hcl_log>, gpm::conv_undo_tx, gpm::undo_tx>;
  try {
    other::open(this->pool(), "tx");
    FAIL() << "opened an undo transaction over the other kind of log";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::layout_mismatch) << e.what();
  }
}

// The batch record is checked by the common object header's validator: every damaged, foreign or
// other-version record is a gpm::error that says which.
TYPED_TEST(UndoTx, OpenValidatesTheBatchRecord) {
  using tx_type = typename TestFixture::tx_type;
  gpm::pool& p = this->pool();
  const auto expect_open_error = [&p](const std::string& name, gpm::errc code,
                                      const std::string& words) {
    gpm::test::expect_error(code, words, [&] { tx_type::open(p, name); });
  };
  auto* h = p.host_ptr<L::undo_record_header>(p.get("tx").offset);
  const L::undo_record_header good = *h;

  expect_open_error("nothing", gpm::errc::not_found, "no object named 'nothing'");
  // Another kind of structure under the name (the transaction's own log) is not a record.
  expect_open_error("tx.log", gpm::errc::corrupt, "not a gpm::undo_tx batch record");
  // A record of format 1.0, before the common object header: the same magic bytes, a 32-bit
  // version 1, and a checksum of the line's first 120 bytes in its last 8.
  std::memset(h, 0, sizeof *h);
  char* line = reinterpret_cast<char*>(h);
  const std::uint64_t magic = 0x31584f444e554d47ull;  // "GMUNDOX1"
  const std::uint32_t version = 1;
  std::memcpy(line, &magic, sizeof magic);
  std::memcpy(line + 8, &version, sizeof version);
  const std::uint64_t sum = gpm::checksum64(line, 120);
  std::memcpy(line + 120, &sum, sizeof sum);
  expect_open_error("tx", gpm::errc::version, "format version 1.0, older");
  *h = good;
  h->common.major = 3;
  gpm::format::seal_header(h);
  expect_open_error("tx", gpm::errc::version, "format version 3.0, newer");
  *h = good;
  h->reserved[2] ^= 1;  // a flipped bit
  expect_open_error("tx", gpm::errc::corrupt, "checksum");
  *h = good;
  std::memset(h, 0, sizeof *h);  // creation interrupted before the header was written
  expect_open_error("tx", gpm::errc::corrupt, "interrupted");
  *h = good;
  p.allocate("small", 64);
  expect_open_error("small", gpm::errc::corrupt, "64 bytes, too short");
  // The fixture's handle holds the log: a second handle is refused until it is gone.
  expect_open_error("tx", gpm::errc::busy, "open already in this process");
  this->tx_.reset();
  EXPECT_NO_THROW(tx_type::open(p, "tx"));
}

// conv_undo_tx: any kernel shape may log; blocks b and b + partitions share partition b, whose
// entries roll back newest first, so a byte updated by several such blocks is restored.
TEST(ConvUndoTx, BlocksSharingAPartitionRollBack) {
  gpm::test::scratch_pool sp("undo-shared");
  gpm::conv_undo_tx tx = gpm::conv_undo_tx::create(sp.get(), "tx", {1, 64 << 10});
  const std::uint64_t off = sp.get().allocate("array", kElems * sizeof(std::uint64_t));
  auto* a = sp.get().host_ptr<std::uint64_t>(off);
  for (std::uint32_t i = 0; i < kElems; ++i) a[i] = value_of(0, i);
  gpm::device_buffer<std::uint32_t> status(3 * 32);
  tx.begin();
  for (std::uint64_t salt = 1; salt <= 3; ++salt) {  // 3 blocks of 32, then one of 96, ...
    const unsigned blocks = salt == 2 ? 1 : 3;
    gpm::launch(update_array<gpm::conv_log>, blocks, 96 / blocks, 0, nullptr, tx.ref(),
                sp.get().ref(), off, kElems, salt, status.data());
    for (std::uint32_t s : gpm::test::statuses(status)) ASSERT_EQ(s, 0u);
  }
  EXPECT_EQ(a[5], value_of(3, 5));
  EXPECT_EQ(tx.grid().x * tx.block().x, 1u);  // one thread for one partition
  EXPECT_TRUE(tx.recover());
  for (std::uint32_t i = 0; i < kElems; ++i) ASSERT_EQ(a[i], value_of(0, i)) << "element " << i;
}

// Thread t of the grid updates its own elements t * 8, ..., t * 8 + depth(t) - 1, so streams
// (and partitions) are filled to different depths, some not at all.
__host__ __device__ std::uint32_t depth_of(std::uint64_t t) { return t % 7; }

template <class Log>
__global__ void update_to_depth(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool,
                                std::uint64_t off, std::uint64_t salt, std::uint32_t* status) {
  const std::uint64_t t = gpm::tile_index();
  std::uint64_t* a = pool.ptr<std::uint64_t>(off);
  status[t] = 0;
  for (std::uint64_t k = 0; k < depth_of(t); ++k) {
    const log_status st = tx.update(&a[t * 8 + k], value_of(salt, t * 8 + k));
    if (st != log_status::ok) status[t] = static_cast<std::uint32_t>(st);
  }
}

// recover() rolls back from a copy of the log's used lines in GPU memory (undo_tx.cu): streams
// filled to different depths, a warp only partly made of threads (48 threads a block), and
// partitions whose size is not a multiple of 16 bytes, so that copied pieces start and end
// between lines. After recovery every element is as before the batch.
template <class Tx>
void recover_ragged(Tx tx, gpm::pool& pool, std::uint32_t blocks, std::uint32_t threads) {
  const std::uint64_t n = std::uint64_t{blocks} * threads * 8;
  const std::uint64_t off = pool.allocate("ragged", n * sizeof(std::uint64_t));
  auto* a = pool.host_ptr<std::uint64_t>(off);
  for (std::uint64_t i = 0; i < n; ++i) a[i] = value_of(0, i);
  gpm::device_buffer<std::uint32_t> status(std::uint64_t{blocks} * threads);
  tx.begin();
  gpm::launch(update_to_depth<typename Tx::log_type>, blocks, threads, 0, nullptr, tx.ref(),
              pool.ref(), off, 1, status.data());
  for (std::uint32_t s : gpm::test::statuses(status)) ASSERT_EQ(s, 0u);
  ASSERT_EQ(a[8 + 0], value_of(1, 8));  // thread 1 updated one element
  EXPECT_TRUE(tx.recover());
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], value_of(0, i)) << "element " << i;
}

TEST(UndoTxRecovery, RaggedStreamsAndAPartialWarp) {
  gpm::test::scratch_pool sp("undo-ragged");
  recover_ragged(gpm::undo_tx::create(sp.get(), "tx", {3, 48, 6 * 48}), sp.get(), 3, 48);
}

TEST(ConvUndoTxRecovery, RaggedPartitionsOfAnOddSize) {
  gpm::test::scratch_pool sp("undo-ragged-conv");
  // 4 * 4001 bytes a partition; blocks 0..2 log to partitions 0..2 of 5, 3 and 4 stay empty
  recover_ragged(gpm::conv_undo_tx::create(sp.get(), "tx", {5, 4 * 4001}), sp.get(), 3, 48);
}

}  // namespace
