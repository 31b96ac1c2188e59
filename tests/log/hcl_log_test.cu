// Unit tests of gpm::hcl_log: insert / read / remove / clear / size / is_empty per thread, entry
// sizes from 1 byte to many rows, the striped layout, geometry checks, full logs, reopen, header
// validation, and detection of torn or damaged entries.
#include <gpm/log/hcl_log.cuh>

#include <cstdlib>
#include <cstring>

#include "scratch_pool.hpp"

namespace {

namespace L = gpm::detail::log;
using gpm::log_status;

constexpr std::uint32_t kMaxEntry = 1024;
constexpr std::uint32_t kMismatch = 100;  // a kernel read back other bytes than it wrote

__host__ __device__ unsigned char pattern(std::uint64_t thread, std::uint32_t k, std::uint32_t i,
                                          std::uint32_t bytes) {
  return static_cast<unsigned char>(thread * 131 + k * 17 + i * 7 + bytes);
}

// CUDA's linear thread numbering, for 1-D and 2-D launches alike.
__device__ std::uint64_t global_thread() {
  const std::uint64_t block = blockIdx.x + std::uint64_t{gridDim.x} * blockIdx.y;
  return block * blockDim.x * blockDim.y + threadIdx.x + blockDim.x * threadIdx.y;
}

// Each thread inserts `count` entries of `bytes` bytes; status[t] is the first failure or 0.
__global__ void insert_entries(gpm::hcl_log_ref log, std::uint32_t bytes, std::uint32_t count,
                               std::uint32_t* status) {
  const std::uint64_t t = global_thread();
  unsigned char buf[kMaxEntry];
  for (std::uint32_t k = 0; k < count; ++k) {
    for (std::uint32_t i = 0; i < bytes; ++i) buf[i] = pattern(t, k, i, bytes);
    const log_status st = log.insert(buf, bytes);
    if (st != log_status::ok) {
      status[t] = static_cast<std::uint32_t>(st);
      return;
    }
  }
  status[t] = 0;
}

// Each thread reads and removes its `count` entries, newest first, checking their bytes, then
// expects its log to be empty.
__global__ void pop_entries(gpm::hcl_log_ref log, std::uint32_t bytes, std::uint32_t count,
                            std::uint32_t* status) {
  const std::uint64_t t = global_thread();
  unsigned char buf[kMaxEntry];
  status[t] = 0;
  for (std::uint32_t k = count; k-- > 0;) {
    std::uint32_t newest = 0;
    if (log.newest_size(newest) != log_status::ok || newest != bytes) {
      status[t] = kMismatch + 1;
      return;
    }
    log_status st = log.read(buf, bytes);
    if (st != log_status::ok) {
      status[t] = static_cast<std::uint32_t>(st);
      return;
    }
    for (std::uint32_t i = 0; i < bytes; ++i) {
      if (buf[i] != pattern(t, k, i, bytes)) {
        status[t] = kMismatch;
        return;
      }
    }
    st = log.remove(bytes);
    if (st != log_status::ok) {
      status[t] = static_cast<std::uint32_t>(st);
      return;
    }
  }
  if (!log.is_empty() || log.size() != 0 || log.read(buf, bytes) != log_status::empty ||
      log.remove(bytes) != log_status::empty) {
    status[t] = kMismatch + 2;
  }
}

// One operation per thread, chosen by `op`, its status per thread.
enum class op : std::uint32_t { read, remove, clear, read_wrong_size, size };
__global__ void one_op(gpm::hcl_log_ref log, op o, std::uint32_t bytes, std::uint32_t* status) {
  const std::uint64_t t = global_thread();
  unsigned char buf[kMaxEntry];
  log_status st = log_status::ok;
  switch (o) {
    case op::read: st = log.read(buf, bytes); break;
    case op::remove: st = log.remove(bytes); break;
    case op::clear: st = log.clear(); break;
    case op::read_wrong_size: st = log.read(buf, bytes + 1); break;
    case op::size: status[t] = static_cast<std::uint32_t>(log.size()); return;
  }
  status[t] = static_cast<std::uint32_t>(st);
}

// The raw bytes of a log object, for tests that inspect or damage them.
struct raw_log {
  raw_log(gpm::pool& p, const std::string& name) {
    const std::uint64_t off = p.get(name).offset;
    head = p.host_ptr<L::header>(off);
    state = p.host_ptr<L::state>(off + L::state_offset);
    tails = p.host_ptr<std::uint64_t>(off + head->control_offset);
    data = p.host_ptr<char>(off + head->data_offset);
  }
  const L::header* head;
  L::state* state;
  std::uint64_t* tails;
  char* data;
};

struct geometry_case {
  std::uint32_t blocks, threads;
};

std::uint32_t threads_of(const gpm::hcl_log& log) {
  return log.geometry().blocks * log.geometry().threads_per_block;
}

void expect_all(const std::vector<std::uint32_t>& s, std::uint32_t want, const std::string& what) {
  for (std::size_t t = 0; t < s.size(); ++t) {
    ASSERT_EQ(s[t], want) << what << ": thread " << t;
  }
}

// A one-warp log "log" whose 32 threads each inserted `count` entries of `bytes` bytes.
gpm::hcl_log one_warp_log(gpm::pool& p, std::uint32_t bytes, std::uint32_t count) {
  gpm::hcl_log log = gpm::hcl_log::create(p, "log", {1, 32, 256});
  gpm::device_buffer<std::uint32_t> status(32);
  gpm::launch(insert_entries, 1, 32, 0, nullptr, log.ref(), bytes, count, status.data());
  expect_all(gpm::test::statuses(status), 0, "insert");
  return log;
}

TEST(HclLog, InsertReadRemoveEverySize) {
  // 48 threads per block: the second warp of each block is half full.
  gpm::test::scratch_pool sp("hcl-sizes", 32 << 20);
  for (std::uint32_t bytes : {1u, 3u, 4u, 5u, 12u, 128u, 129u, 300u, 1000u}) {
    const std::string name = "log-" + std::to_string(bytes);
    const std::uint32_t count = 3;
    const gpm::hcl_geometry g{3, 48, count * gpm::hcl_log::entry_footprint(bytes)};
    gpm::hcl_log log = gpm::hcl_log::create(sp.get(), name, g);
    EXPECT_TRUE(log.is_empty());
    gpm::device_buffer<std::uint32_t> status(threads_of(log));
    gpm::launch(insert_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, count,
                status.data());
    expect_all(gpm::test::statuses(status), 0, name + " insert");
    EXPECT_FALSE(log.is_empty());
    for (std::uint32_t b = 0; b < g.blocks; ++b) {
      for (std::uint32_t t = 0; t < g.threads_per_block; ++t) {
        ASSERT_EQ(log.size(b, t), count * gpm::hcl_log::entry_footprint(bytes)) << name;
      }
    }
    gpm::launch(pop_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, count,
                status.data());
    expect_all(gpm::test::statuses(status), 0, name + " pop");
    EXPECT_TRUE(log.is_empty());
    EXPECT_NO_THROW(log.check_faults());  // reading an empty log is not a failure
  }
}

TEST(HclLog, EntriesAreStripedAcrossRowsSoAWarpWritesWholeLines) {
  gpm::test::scratch_pool sp("hcl-stripe");
  const std::uint32_t bytes = 8;  // two payload chunks, then three trailer chunks
  gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {2, 64, 64});
  gpm::device_buffer<std::uint32_t> status(threads_of(log));
  gpm::launch(insert_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, 1u,
              status.data());
  expect_all(gpm::test::statuses(status), 0, "insert");
  const raw_log raw(sp.get(), "log");
  const L::header* head = raw.head;
  const char* data = raw.data;
  const std::uint64_t rows = head->stream_chunks;  // rows per warp region
  for (std::uint32_t warp = 0; warp < 4; ++warp) {
    for (std::uint32_t row = 0; row < 2; ++row) {
      // Row `row` of the warp's region holds chunk `row` of lanes 0..31, in lane order.
      const unsigned char* line =
          reinterpret_cast<const unsigned char*>(data + (warp * rows + row) * L::line_bytes);
      for (std::uint32_t lane = 0; lane < 32; ++lane) {
        const std::uint64_t t = warp * 32 + lane;
        for (std::uint32_t i = 0; i < 4; ++i) {
          ASSERT_EQ(line[lane * 4 + i], pattern(t, 0, row * 4 + i, bytes))
              << "warp " << warp << " row " << row << " lane " << lane;
        }
      }
    }
    // The trailer's first chunk (row 2) holds each lane's entry size.
    const auto* sizes = reinterpret_cast<const std::uint32_t*>(data + (warp * rows + 2) * 128);
    for (std::uint32_t lane = 0; lane < 32; ++lane) ASSERT_EQ(sizes[lane], bytes);
  }
  EXPECT_GE(gpm::hcl_log::object_bytes({2, 64, 64}), head->data_offset + 4 * rows * 128);
}

TEST(HclLog, FullThreadLogRefusesAndWritesNothing) {
  gpm::test::scratch_pool sp("hcl-full");
  const std::uint32_t bytes = 20;
  gpm::hcl_log log =
      gpm::hcl_log::create(sp.get(), "log", {2, 32, 2 * gpm::hcl_log::entry_footprint(bytes)});
  gpm::device_buffer<std::uint32_t> status(threads_of(log));
  gpm::launch(insert_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, 3u,
              status.data());
  expect_all(gpm::test::statuses(status), static_cast<std::uint32_t>(log_status::full), "3rd");
  EXPECT_EQ(log.size(1, 31), 2 * gpm::hcl_log::entry_footprint(bytes));
  try {
    log.check_faults();
    FAIL() << "check_faults did not report the full log";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
  }
  log.clear_faults();
  EXPECT_NO_THROW(log.check_faults());
  // The two entries that fit are intact.
  gpm::launch(pop_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, 2u,
              status.data());
  expect_all(gpm::test::statuses(status), 0, "pop");
}

TEST(HclLog, AnotherLaunchGeometryIsAnErrorAndChangesNothing) {
  gpm::test::scratch_pool sp("hcl-geometry");
  gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {4, 64, 256});
  const geometry_case wrong[] = {{3, 64}, {4, 32}, {8, 32}, {4, 128}};
  for (const geometry_case& c : wrong) {
    gpm::device_buffer<std::uint32_t> status(c.blocks * c.threads);
    gpm::launch(insert_entries, c.blocks, c.threads, 0, nullptr, log.ref(), 8u, 1u, status.data());
    expect_all(gpm::test::statuses(status), static_cast<std::uint32_t>(log_status::wrong_geometry),
               "grid " + std::to_string(c.blocks) + " x " + std::to_string(c.threads));
    EXPECT_TRUE(log.is_empty());
    try {
      log.check_faults();
      FAIL() << "no error for a launch of " << c.blocks << " x " << c.threads;
    } catch (const gpm::error& e) {
      EXPECT_EQ(e.code(), gpm::errc::invalid_argument);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("wrong_geometry"), std::string::npos) << msg;
      EXPECT_NE(msg.find("4 blocks of 64 threads"), std::string::npos) << msg;
      EXPECT_NE(msg.find("grid (" + std::to_string(c.blocks)), std::string::npos) << msg;
    }
    log.clear_faults();
  }
  // A 2-D launch whose sizes multiply out to the geometry is the same geometry, with the same
  // thread numbering: a 1-D launch reads back what it wrote.
  gpm::device_buffer<std::uint32_t> status(4 * 64);
  gpm::launch(insert_entries, dim3(2, 2), dim3(32, 2), 0, nullptr, log.ref(), 8u, 1u,
              status.data());
  expect_all(gpm::test::statuses(status), 0, "2-D launch");
  EXPECT_NO_THROW(log.check_faults());
  gpm::launch(pop_entries, 4, 64, 0, nullptr, log.ref(), 8u, 1u, status.data());
  expect_all(gpm::test::statuses(status), 0, "1-D pop");
}

TEST(HclLog, ReadAndRemoveReportEmptyAndSizeMismatch) {
  gpm::test::scratch_pool sp("hcl-status");
  gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {1, 32, 256});
  gpm::device_buffer<std::uint32_t> status(32);
  gpm::launch(one_op, 1, 32, 0, nullptr, log.ref(), op::read, 8u, status.data());
  expect_all(gpm::test::statuses(status), static_cast<std::uint32_t>(log_status::empty), "read");
  gpm::launch(one_op, 1, 32, 0, nullptr, log.ref(), op::remove, 8u, status.data());
  expect_all(gpm::test::statuses(status), static_cast<std::uint32_t>(log_status::empty), "rm");
  EXPECT_NO_THROW(log.check_faults());
  gpm::launch(insert_entries, 1, 32, 0, nullptr, log.ref(), 8u, 1u, status.data());
  expect_all(gpm::test::statuses(status), 0, "insert");
  gpm::launch(one_op, 1, 32, 0, nullptr, log.ref(), op::read_wrong_size, 8u, status.data());
  expect_all(gpm::test::statuses(status), static_cast<std::uint32_t>(log_status::size_mismatch),
             "wrong size");
  gpm::launch(one_op, 1, 32, 0, nullptr, log.ref(), op::remove, 12u, status.data());
  expect_all(gpm::test::statuses(status), static_cast<std::uint32_t>(log_status::size_mismatch),
             "remove wrong size");
  EXPECT_EQ(log.size(0, 5), gpm::hcl_log::entry_footprint(8));  // nothing was removed
  EXPECT_THROW(log.check_faults(), gpm::error);
}

TEST(HclLog, ClearWholeLogOneThreadOrFromTheDevice) {
  gpm::test::scratch_pool sp("hcl-clear");
  gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {2, 32, 256});
  gpm::device_buffer<std::uint32_t> status(64);
  const auto fill = [&] {
    gpm::launch(insert_entries, 2, 32, 0, nullptr, log.ref(), 16u, 2u, status.data());
    expect_all(gpm::test::statuses(status), 0, "insert");
  };
  fill();
  const std::uint64_t g = log.generation();
  log.clear();
  EXPECT_EQ(log.generation(), g + 1);
  EXPECT_TRUE(log.is_empty());
  fill();
  log.clear(1, 7);
  EXPECT_EQ(log.size(1, 7), 0u);
  EXPECT_EQ(log.size(1, 8), 2 * gpm::hcl_log::entry_footprint(16));
  EXPECT_THROW(log.clear(2, 0), gpm::error);
  EXPECT_THROW(log.size(0, 32), gpm::error);
  gpm::launch(one_op, 2, 32, 0, nullptr, log.ref(), op::clear, 0u, status.data());
  expect_all(gpm::test::statuses(status), 0, "device clear");
  EXPECT_TRUE(log.is_empty());
  gpm::launch(one_op, 2, 32, 0, nullptr, log.ref(), op::size, 0u, status.data());
  expect_all(gpm::test::statuses(status), 0, "device size");
  // Inserting after a clear reuses the space from the start.
  fill();
  gpm::launch(pop_entries, 2, 32, 0, nullptr, log.ref(), 16u, 2u, status.data());
  expect_all(gpm::test::statuses(status), 0, "pop");
}

TEST(HclLog, TagWrapAroundNeverRevivesOldTails) {
  gpm::test::scratch_pool sp("hcl-wrap");
  gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {1, 32, 256});
  const raw_log raw(sp.get(), "log");
  L::state* st = raw.state;
  std::uint64_t* tails = raw.tails;
  const std::uint64_t wrap = std::uint64_t{1} << (64 - L::tail_used_bits);
  st->generation = wrap - 1;  // the next clear wraps the tag to 0
  // Thread 3's tail was written 2^24 generations before the wrap: tag 0, 5 chunks used.
  tails[3] = L::tail_word(0, 5);
  gpm::device_buffer<std::uint32_t> status(32);
  gpm::launch(insert_entries, 1, 32, 0, nullptr, log.ref(), 4u, 1u, status.data());
  expect_all(gpm::test::statuses(status), 0, "insert");
  EXPECT_EQ(log.size(0, 3), gpm::hcl_log::entry_footprint(4));  // it overwrote the stale tail
  tails[4] = L::tail_word(0, 5);                                // a stale tail again
  log.clear();
  EXPECT_EQ(log.generation(), wrap);
  EXPECT_TRUE(log.is_empty()) << "a tail from an older generation matched the wrapped tag";
}

// A crash between a wrap's generation store and the rewrite of the live tails leaves tails of the
// last tag before the wrap: open() rewrites them, else 2^24 - 1 clears later they would match.
TEST(HclLog, OpenFinishesAWrapACrashInterrupted) {
  gpm::test::scratch_pool sp("hcl-wrap-crash");
  const std::uint64_t wrap = std::uint64_t{1} << (64 - L::tail_used_bits);
  {
    gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {1, 32, 256});
    const raw_log raw(sp.get(), "log");
    raw.state->generation = wrap - 1;
    gpm::device_buffer<std::uint32_t> status(32);
    gpm::launch(insert_entries, 1, 32, 0, nullptr, log.ref(), 4u, 1u, status.data());
    expect_all(gpm::test::statuses(status), 0, "insert");
    raw.state->generation = wrap;  // the clear's generation store, and then the crash
  }
  gpm::hcl_log log = gpm::hcl_log::open(sp.reopen(), "log");
  EXPECT_TRUE(log.is_empty());
  const raw_log raw(sp.get(), "log");
  raw.state->generation = 2 * wrap - 1;  // as 2^24 - 1 clears would leave it
  EXPECT_TRUE(log.is_empty()) << "a tail from before the wrap came back";
}

TEST(HclLog, ReopenAfterCloseKeepsEntries) {
  gpm::test::scratch_pool sp("hcl-reopen");
  const std::uint32_t bytes = 40;
  {
    gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", {2, 40, 512});
    gpm::device_buffer<std::uint32_t> status(80);
    gpm::launch(insert_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, 4u,
                status.data());
    expect_all(gpm::test::statuses(status), 0, "insert");
  }
  sp.reopen();
  gpm::hcl_log log = gpm::hcl_log::open(sp.get(), "log");
  EXPECT_EQ(log.geometry().blocks, 2u);
  EXPECT_EQ(log.geometry().threads_per_block, 40u);
  EXPECT_EQ(log.geometry().bytes_per_thread, 512u);
  gpm::device_buffer<std::uint32_t> status(80);
  gpm::launch(pop_entries, log.grid(), log.block(), 0, nullptr, log.ref(), bytes, 4u,
              status.data());
  expect_all(gpm::test::statuses(status), 0, "pop after reopen");
}

// Expects open() to fail with `code` and a message containing `words`.
void expect_open_error(gpm::pool& p, const std::string& name, gpm::errc code,
                       const std::string& words) {
  gpm::test::expect_error(code, words, [&] { gpm::hcl_log::open(p, name); });
}

TEST(HclLog, OpenValidatesTheHeader) {
  gpm::test::scratch_pool sp("hcl-header");
  gpm::pool& p = sp.get();
  gpm::hcl_log::create(p, "log", {2, 64, 128});
  auto* h = p.host_ptr<L::header>(p.get("log").offset);
  const L::header good = *h;
  const auto reseal = [&] { gpm::format::seal_header(h); };

  expect_open_error(p, "nothing", gpm::errc::not_found, "no object named 'nothing'");
  h->streams ^= 1;  // a flipped bit
  expect_open_error(p, "log", gpm::errc::corrupt, "checksum");
  *h = good;
  h->common.major = 99;
  reseal();
  expect_open_error(p, "log", gpm::errc::version, "version 99");
  *h = good;
  h->common.major = 1;  // a log of format 1.0, before the common object header
  expect_open_error(p, "log", gpm::errc::version, "format version 1.0, older");
  *h = good;
  h->common.magic[0] = '4';  // a foreign magic is corrupt, as for every on-media structure
  expect_open_error(p, "log", gpm::errc::corrupt, "not a gpmkit log");
  *h = good;
  h->data_bytes *= 2;  // sealed, but inconsistent with the geometry
  reseal();
  expect_open_error(p, "log", gpm::errc::corrupt, "inconsistent sizes");
  *h = good;
  std::memset(h, 0, sizeof *h);  // creation interrupted before the header was written
  expect_open_error(p, "log", gpm::errc::corrupt, "interrupted");
  *h = good;
  EXPECT_NO_THROW(gpm::hcl_log::open(p, "log"));

  p.allocate("small", 64);
  expect_open_error(p, "small", gpm::errc::corrupt, "64 bytes, too short");
}

TEST(HclLog, CreateRejectsBadGeometryAndFullPools) {
  gpm::test::scratch_pool sp("hcl-create", 1 << 20);
  gpm::pool& p = sp.get();
  EXPECT_THROW(gpm::hcl_log::create(p, "a", {0, 32, 64}), gpm::error);
  EXPECT_THROW(gpm::hcl_log::create(p, "a", {1, 0, 64}), gpm::error);
  EXPECT_THROW(gpm::hcl_log::create(p, "a", {1, 2048, 64}), gpm::error);
  EXPECT_THROW(gpm::hcl_log::create(p, "a", {1, 32, 4}), gpm::error);
  // 64-bit sizes: 65536 blocks of 1024 threads of 128 bytes is 8 GiB of log.
  const gpm::hcl_geometry big{65536, 1024, 128};
  EXPECT_GT(gpm::hcl_log::object_bytes(big), std::uint64_t{8} << 30);
  try {
    gpm::hcl_log::create(p, "big", big);
    FAIL() << "an 8 GiB log fit in a 1 MiB pool";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("larger pool"), std::string::npos) << e.what();
  }
  gpm::hcl_log::create(p, "a", {1, 32, 64});
  try {
    gpm::hcl_log::create(p, "a", {1, 32, 64});
    FAIL() << "created a log over an existing object";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::already_exists);
  }
}

// Offsets past 4 GiB: the last warps' regions start beyond 2^32 bytes into the log. The entries
// must land there (checked on the host, since a truncated offset would still round-trip). The
// pool takes 4.5 GiB of tmpfs, so this runs on GPU builds, or where GPMKIT_LARGE_TESTS=1.
TEST(HclLog, LogsLargerThan4GiB) {
  if (!GPM_BACKEND_CUDA && std::getenv("GPMKIT_LARGE_TESTS") == nullptr) {
    GTEST_SKIP() << "needs 4.5 GiB of tmpfs; set GPMKIT_LARGE_TESTS=1 to run on the host backend";
  }
  const gpm::hcl_geometry g{3, 1024, 3u << 19};  // 96 warps of 48 MiB
  const std::uint64_t bytes = gpm::hcl_log::object_bytes(g);
  ASSERT_GT(bytes, std::uint64_t{1} << 32);
  gpm::test::scratch_pool sp("hcl-large", (bytes + (1 << 20)) / 4096 * 4096);
  gpm::hcl_log log = gpm::hcl_log::create(sp.get(), "log", g);
  const std::uint32_t entry = 24;
  gpm::device_buffer<std::uint32_t> status(3 * 1024);
  gpm::launch(insert_entries, log.grid(), log.block(), 0, nullptr, log.ref(), entry, 2u,
              status.data());
  expect_all(gpm::test::statuses(status), 0, "insert");
  const raw_log raw(sp.get(), "log");
  const std::uint64_t last_warp = 95, region = raw.head->stream_chunks * L::line_bytes;
  ASSERT_GT(raw.head->data_offset + last_warp * region, std::uint64_t{1} << 32);
  const auto* line = reinterpret_cast<const unsigned char*>(raw.data + last_warp * region);
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      ASSERT_EQ(line[lane * 4 + i], pattern(last_warp * 32 + lane, 0, i, entry)) << lane;
    }
  }
  gpm::launch(pop_entries, log.grid(), log.block(), 0, nullptr, log.ref(), entry, 2u,
              status.data());
  expect_all(gpm::test::statuses(status), 0, "pop");
}

TEST(HclLog, DamagedEntryIsReportedNeverReturned) {
  gpm::test::scratch_pool sp("hcl-torn");
  const std::uint32_t bytes = 24;
  gpm::hcl_log log = one_warp_log(sp.get(), bytes, 2);
  gpm::device_buffer<std::uint32_t> status(32);
  // Lane 9's newest entry starts at row entry_chunks(24) = 9; damage its third payload chunk.
  const std::uint64_t row = L::entry_chunks(bytes) + 2;
  raw_log(sp.get(), "log").data[row * L::line_bytes + 9 * 4 + 1] ^= 0x40;
  gpm::launch(one_op, 1, 32, 0, nullptr, log.ref(), op::read, bytes, status.data());
  const auto s = gpm::test::statuses(status);
  for (std::uint32_t t = 0; t < 32; ++t) {
    EXPECT_EQ(s[t], static_cast<std::uint32_t>(t == 9 ? log_status::corrupt : log_status::ok))
        << "thread " << t;
  }
  try {
    log.check_faults();
    FAIL() << "the damaged entry was not reported";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::corrupt);
    EXPECT_NE(std::string(e.what()).find("stream 9"), std::string::npos) << e.what();
  }
}

// A crash between writing an entry and its tail leaves bytes past the tail: they do not exist.
TEST(HclLog, EntryWrittenWithoutItsTailDoesNotExist) {
  gpm::test::scratch_pool sp("hcl-untailed");
  const std::uint32_t bytes = 16;
  gpm::hcl_log log = one_warp_log(sp.get(), bytes, 2);
  gpm::device_buffer<std::uint32_t> status(32);
  // Roll every tail back by one entry: the second entries become a torn, untailed insert.
  const raw_log raw(sp.get(), "log");
  for (int t = 0; t < 32; ++t) {
    raw.tails[t] = L::tail_word(log.generation(), L::entry_chunks(bytes));
  }
  gpm::launch(pop_entries, 1, 32, 0, nullptr, log.ref(), bytes, 1u, status.data());
  expect_all(gpm::test::statuses(status), 0, "only the first entries remain");
}

}  // namespace
