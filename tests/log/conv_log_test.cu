// Unit tests of gpm::conv_log: many threads of many blocks appending to shared partitions under
// the partition locks, read / remove / clear / size / is_empty per partition, bad partitions,
// full partitions, locks a crash left held, reopen and header validation.
#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>

#include <algorithm>

#include "scratch_pool.hpp"

namespace {

namespace L = gpm::detail::log;
using gpm::log_status;

struct item {
  std::uint32_t thread;
  std::uint32_t k;
  std::uint64_t check;
};

__host__ __device__ std::uint64_t check_of(std::uint32_t thread, std::uint32_t k) {
  return gpm::mix64((std::uint64_t{thread} << 32) | k);
}

__global__ void append_items(gpm::conv_log_ref log, std::uint32_t per_thread,
                             std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  status[t] = 0;
  for (std::uint32_t k = 0; k < per_thread; ++k) {
    const item it{t, k, check_of(t, k)};
    const log_status st = log.insert(t % log.partitions(), it);
    if (st != log_status::ok) {
      status[t] = static_cast<std::uint32_t>(st);
      return;
    }
  }
}

// Thread p drains partition p into out[p * cap ...], recording how many it found.
__global__ void drain(gpm::conv_log_ref log, item* out, std::uint32_t cap, std::uint32_t* found,
                      std::uint32_t* status) {
  const std::uint32_t p = threadIdx.x;
  if (p >= log.partitions()) return;
  std::uint32_t n = 0;
  status[p] = 0;
  item it;
  log_status st;
  std::uint32_t newest = 0;
  while ((st = log.read(p, it)) == log_status::ok) {
    if (log.newest_size(p, newest) != log_status::ok || newest != sizeof it) {
      st = log_status::size_mismatch;
      break;
    }
    if (n < cap) out[p * cap + n] = it;
    ++n;
    if ((st = log.remove(p, sizeof it)) != log_status::ok) break;
  }
  if (st != log_status::empty) status[p] = static_cast<std::uint32_t>(st);
  if (!log.is_empty(p) || log.size(p) != 0) status[p] = 99;
  found[p] = n;
}

__global__ void touch_partition(gpm::conv_log_ref log, std::uint32_t partition,
                                std::uint32_t* status) {
  std::uint64_t v = 7;
  status[0] = static_cast<std::uint32_t>(log.insert(partition, v));
  status[1] = static_cast<std::uint32_t>(log.read(partition, v));
  status[2] = static_cast<std::uint32_t>(log.clear(partition));
}

TEST(ConvLog, ConcurrentAppendsFromManyBlocksLoseNothing) {
  gpm::test::scratch_pool sp("conv-concurrent");
  const std::uint32_t partitions = 8, blocks = 16, threads = 64, per_thread = 3;
  const std::uint32_t total = blocks * threads * per_thread;
  const std::uint32_t cap = total / partitions;
  gpm::conv_log log = gpm::conv_log::create(sp.get(), "meta", partitions,
                                            cap * gpm::conv_log::entry_footprint(sizeof(item)));
  gpm::device_buffer<std::uint32_t> status(blocks * threads);
  gpm::launch(append_items, blocks, threads, 0, nullptr, log.ref(), per_thread, status.data());
  for (std::uint32_t s : gpm::test::statuses(status)) ASSERT_EQ(s, 0u);
  for (std::uint32_t p = 0; p < partitions; ++p) {
    EXPECT_EQ(log.size(p), cap * gpm::conv_log::entry_footprint(sizeof(item))) << p;
  }
  gpm::device_buffer<item> out(total);
  gpm::device_buffer<std::uint32_t> found(partitions);
  gpm::launch(drain, 1, 32, 0, nullptr, log.ref(), out.data(), cap, found.data(), status.data());
  const auto st = gpm::test::statuses(status);
  const auto n = gpm::test::to_host(found);
  std::vector<item> items = gpm::test::to_host(out);
  for (std::uint32_t p = 0; p < partitions; ++p) {
    ASSERT_EQ(st[p], 0u) << "partition " << p;
    ASSERT_EQ(n[p], cap) << "partition " << p;
  }
  // Every (thread, k) exactly once, in its thread's partition, each thread's items newest first.
  std::vector<int> seen(total, 0);
  for (std::uint32_t p = 0; p < partitions; ++p) {
    std::vector<std::uint32_t> last_k(blocks * threads, ~0u);
    for (std::uint32_t i = 0; i < cap; ++i) {
      const item& it = items[p * cap + i];
      ASSERT_LT(it.thread, blocks * threads);
      ASSERT_EQ(it.thread % partitions, p);
      ASSERT_EQ(it.check, check_of(it.thread, it.k));
      ASSERT_LT(it.k, last_k[it.thread]) << "entries of one thread out of stack order";
      last_k[it.thread] = it.k;
      ++seen[it.thread * per_thread + it.k];
    }
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  EXPECT_TRUE(log.is_empty());
}

TEST(ConvLog, BadPartitionAndFullPartitionAreReported) {
  gpm::test::scratch_pool sp("conv-errors");
  gpm::conv_log log = gpm::conv_log::create(sp.get(), "meta", 4, 40);
  gpm::device_buffer<std::uint32_t> status(3);
  gpm::launch(touch_partition, 1, 1, 0, nullptr, log.ref(), 4u, status.data());
  for (std::uint32_t s : gpm::test::statuses(status)) {
    EXPECT_EQ(s, static_cast<std::uint32_t>(log_status::bad_partition));
  }
  try {
    log.check_faults();
    FAIL() << "no error for partition 4 of 4";
  } catch (const gpm::error& e) {
    EXPECT_NE(std::string(e.what()).find("numbered from 0 to 3"), std::string::npos) << e.what();
  }
  log.clear_faults();
  // 40 bytes hold one 16-byte item (28 bytes with its trailer), not two.
  gpm::device_buffer<std::uint32_t> st(32);
  gpm::launch(append_items, 1, 1, 0, nullptr, log.ref(), 1u, st.data());
  EXPECT_EQ(gpm::test::statuses(st)[0], 0u);
  gpm::launch(append_items, 1, 1, 0, nullptr, log.ref(), 1u, st.data());
  EXPECT_EQ(gpm::test::statuses(st)[0], static_cast<std::uint32_t>(log_status::full));
  EXPECT_EQ(log.size(0), gpm::conv_log::entry_footprint(sizeof(item)));
  EXPECT_THROW(log.check_faults(), gpm::error);
  EXPECT_THROW(log.size(4), gpm::error);
  EXPECT_THROW(log.clear(9), gpm::error);
}

TEST(ConvLog, ClearOnePartitionOrAll) {
  gpm::test::scratch_pool sp("conv-clear");
  gpm::conv_log log = gpm::conv_log::create(sp.get(), "meta", 4, 1024);
  gpm::device_buffer<std::uint32_t> status(64);
  gpm::launch(append_items, 1, 64, 0, nullptr, log.ref(), 2u, status.data());
  for (std::uint32_t s : gpm::test::statuses(status)) ASSERT_EQ(s, 0u);
  log.clear(2);
  EXPECT_EQ(log.size(2), 0u);
  EXPECT_GT(log.size(3), 0u);
  EXPECT_FALSE(log.is_empty());
  log.clear();
  EXPECT_TRUE(log.is_empty());
  EXPECT_EQ(log.partitions(), 4u);
  EXPECT_EQ(log.bytes_per_partition(), 1024u);
}

TEST(ConvLog, ReopenReleasesLocksACrashLeftHeld) {
  gpm::test::scratch_pool sp("conv-locks");
  {
    gpm::conv_log log = gpm::conv_log::create(sp.get(), "meta", 2, 256);
    gpm::device_buffer<std::uint32_t> status(2);
    gpm::launch(append_items, 1, 2, 0, nullptr, log.ref(), 1u, status.data());
    for (std::uint32_t s : gpm::test::statuses(status)) ASSERT_EQ(s, 0u);
    // A thread died holding partition 1's lock, in a log whose control line held the lock (the
    // locks live in GPU memory now: the old word must be ignored).
    const auto obj = sp.get().get("meta");
    const auto* head = sp.get().host_ptr<L::header>(obj.offset);
    sp.get().host_ptr<L::partition_control>(obj.offset + head->control_offset)[1].unused = 1;
  }
  sp.reopen();
  gpm::conv_log log = gpm::conv_log::open(sp.get(), "meta");
  EXPECT_EQ(log.size(1), gpm::conv_log::entry_footprint(sizeof(item)));
  gpm::device_buffer<std::uint32_t> status(3);
  gpm::launch(touch_partition, 1, 1, 0, nullptr, log.ref(), 1u, status.data());
  for (std::uint32_t s : gpm::test::statuses(status)) EXPECT_EQ(s, 0u);  // no deadlock
}

TEST(ConvLog, OpenChecksKindAndCreateChecksArguments) {
  gpm::test::scratch_pool sp("conv-open");
  gpm::pool& p = sp.get();
  gpm::conv_log::create(p, "meta", 2, 64);
  gpm::hcl_log::create(p, "hcl", {1, 32, 64});
  try {
    gpm::conv_log::open(p, "hcl");
    FAIL() << "opened an hcl_log as a conv_log";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::layout_mismatch);
    EXPECT_NE(std::string(e.what()).find("is an hcl_log, not a conv_log"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(gpm::hcl_log::open(p, "meta"), gpm::error);
  {  // a log is open once per process: a second handle would clear or recover it under the first
    const gpm::conv_log first = gpm::conv_log::open(p, "meta");
    try {
      gpm::conv_log::open(p, "meta");
      FAIL() << "opened an open log again";
    } catch (const gpm::error& e) {
      EXPECT_EQ(e.code(), gpm::errc::busy) << e.what();
    }
  }
  gpm::conv_log::open(p, "meta");  // released with the first handle
  EXPECT_THROW(gpm::conv_log::create(p, "x", 0, 64), gpm::error);
  EXPECT_THROW(gpm::conv_log::create(p, "x", 2, 4), gpm::error);
  // Geometries whose sizes pass 64 bits are refused, never wrapped to a small object.
  for (const auto& [partitions, bytes] :
       {std::pair{0xffffffffu, std::uint64_t{1} << 40}, std::pair{2u, ~std::uint64_t{0}}}) {
    try {
      gpm::conv_log::create(p, "x", partitions, bytes);
      FAIL() << "created a log of " << partitions << " partitions of " << bytes << " bytes";
    } catch (const gpm::error& e) {
      EXPECT_TRUE(e.code() == gpm::errc::invalid_argument) << e.what();
    }
  }
  try {
    gpm::hcl_log::create(p, "x", {0xffffffffu, 1024, std::uint64_t{1} << 40});
    FAIL() << "created an hcl_log of 2^32 blocks of 1024 threads of 2^40 bytes";
  } catch (const gpm::error& e) {
    EXPECT_TRUE(e.code() == gpm::errc::invalid_argument) << e.what();
  }
  EXPECT_FALSE(p.find("x")) << "a refused create allocated its object";
  EXPECT_EQ(gpm::conv_log::open(p, "meta").partitions(), 2u);
}

}  // namespace
