// Crash-image tests of the log module (gpm/platform/crash_image.hpp; docs/crash-checking.md).
// Two workloads run on the host emulator under the checker, which at each crash point writes every
// crash image (the persisted lines plus subsets of the unpersisted ones), runs the module's
// recovery on it and compares it with what the workload knows is committed:
//  - logs: kernels insert, remove and clear entries of an hcl_log and a conv_log in one pool, the
//    host clears streams and whole logs, and the generation is fast-forwarded across a wrap of
//    its 24-bit tag; the check opens both logs and drains every stream, which must hold exactly
//    the entries the model holds, intact, newest first;
//  - undo transactions (undo_tx and conv_undo_tx): batches of kernels update an array in place,
//    then commit or are undone by recover(); the check opens the transaction, requires the mark
//    the protocol has published (active, committed count), recovers, and requires the array to be
//    the state the committed batches left.
// With every persist site present no image fails; with any one of the module's sites disabled (a
// mutation: the persist deleted), some image must fail; docs/crash-checking.md holds the table.
// Trials: GPMKIT_CRASH_TRIALS workloads with different seeds (2 by default, more in crash-long).
#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>
#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/persist.hpp>

#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "scratch_pool.hpp"

namespace {

using gpm::log_status;

constexpr char kLayout[] = "log-crash-image";
constexpr char kPool[] = "work.pool";
constexpr std::uint64_t kPoolBytes = 256 << 10;
constexpr std::uint32_t kBlocks = 2, kThreads = 4, kStreams = kBlocks * kThreads;
constexpr std::uint32_t kPartitions = 2;

gpm::pool_options options_for(const gpm::test::scratch_dirs& d) {
  return gpm::test::image_options(d, 8);
}

struct run_result {
  std::optional<gpm::crash_image_failure> failure;
  gpm::crash_image_stats stats;
};

gpm::crash_image_options checker_options(const gpm::test::scratch_dirs& d,
                                         std::vector<std::string> points, std::uint64_t seed,
                                         const std::string& disabled_site) {
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = std::move(points);
  co.seed = seed;
  co.disabled_site = disabled_site;
  return co;
}

// ---- logs: hcl_log and conv_log ------------------------------------------------------------

constexpr std::uint64_t kLogBytes = 256;  // per thread (hcl) and per partition (conv)
constexpr std::uint32_t kMaxEntry = 24;   // bytes of the largest entry
// Streams are numbered hcl threads first, then conv partitions.
constexpr std::uint32_t kAllStreams = kStreams + kPartitions;
constexpr std::uint32_t kMaxDrained = kLogBytes / 16 + 1;  // entries of >= 4 chunks, then empty

// What the kernel of `step` does to stream `s`, and the entry it inserts (its key).
enum class log_op : std::uint32_t { insert, remove, clear };
__host__ __device__ std::uint64_t entry_key(std::uint64_t seed, std::uint64_t step,
                                            std::uint32_t s) {
  return gpm::mix64(gpm::mix64(seed ^ 0x6c6f67ull) ^ (step << 8) ^ s);
}
__host__ __device__ log_op op_of(std::uint64_t key) {
  const std::uint64_t r = key % 10;
  return r < 6 ? log_op::insert : r < 9 ? log_op::remove : log_op::clear;
}
__host__ __device__ std::uint32_t entry_size(std::uint64_t key) {
  return 1 + static_cast<std::uint32_t>((key >> 8) % kMaxEntry);
}
__host__ __device__ unsigned char entry_byte(std::uint64_t key, std::uint32_t j) {
  return static_cast<unsigned char>((key >> (8 * (j % 8))) ^ (j * 29));
}

// The calling thread's operation on its stream of a log: `log` is an hcl_log_ref, or a
// conv_log_ref bound to a partition by `on` below.
template <class Ops>
__device__ log_status run_op(const Ops& log, std::uint64_t key) {
  switch (op_of(key)) {
    case log_op::insert: {
      unsigned char buf[kMaxEntry];
      const std::uint32_t n = entry_size(key);
      for (std::uint32_t j = 0; j < n; ++j) buf[j] = entry_byte(key, j);
      return log.insert(buf, n);
    }
    case log_op::remove: {
      std::uint32_t n = 0;
      const log_status st = log.newest_size(n);
      return st == log_status::ok ? log.remove(n) : st;
    }
    case log_op::clear: return log.clear();
  }
  return log_status::corrupt;
}

// A conv_log partition with hcl_log_ref's per-thread calls.
struct partition_ops {
  gpm::conv_log_ref log;
  std::uint32_t partition;
  __device__ log_status insert(const void* p, std::uint32_t n) const {
    return log.insert(partition, p, n);
  }
  __device__ log_status newest_size(std::uint32_t& n) const {
    return log.newest_size(partition, n);
  }
  __device__ log_status remove(std::uint32_t n) const { return log.remove(partition, n); }
  __device__ log_status clear() const { return log.clear(partition); }
  __device__ log_status read(void* p, std::uint32_t n) const { return log.read(partition, p, n); }
};

// Every thread runs its step on its hcl stream; threads below kPartitions also on their conv
// partition (one thread per partition, so the model knows the order). Statuses go to `out`.
__global__ void log_step(gpm::hcl_log_ref hcl, gpm::conv_log_ref conv, std::uint64_t seed,
                         std::uint64_t step, std::uint32_t* out) {
  const auto g = static_cast<std::uint32_t>(gpm::tile_index());
  out[g] = static_cast<std::uint32_t>(run_op(hcl, entry_key(seed, step, g)));
  if (g < kPartitions) {
    out[kStreams + g] = static_cast<std::uint32_t>(
        run_op(partition_ops{conv, g}, entry_key(seed, step, kStreams + g)));
  }
}

struct drained_entry {
  std::uint32_t status;  // of read (empty ends the stream)
  std::uint32_t bytes;
  unsigned char data[kMaxEntry];
};

// Pops every entry of the calling thread's streams, newest first, into `out` (kMaxDrained slots
// per stream), stopping after the first status other than ok.
template <class Ops>
__device__ void drain(const Ops& log, drained_entry* out) {
  for (std::uint32_t i = 0; i < kMaxDrained; ++i) {
    drained_entry& e = out[i];
    e.bytes = 0;
    e.status = static_cast<std::uint32_t>(log.newest_size(e.bytes));
    if (e.status == static_cast<std::uint32_t>(log_status::ok)) {
      e.status = e.bytes > kMaxEntry ? static_cast<std::uint32_t>(log_status::size_mismatch)
                                     : static_cast<std::uint32_t>(log.read(e.data, e.bytes));
    }
    if (e.status != static_cast<std::uint32_t>(log_status::ok)) return;
    log.remove(e.bytes);
  }
}

__global__ void drain_logs(gpm::hcl_log_ref hcl, gpm::conv_log_ref conv, drained_entry* out) {
  const auto g = static_cast<std::uint32_t>(gpm::tile_index());
  drain(hcl, out + g * kMaxDrained);
  if (g < kPartitions) drain(partition_ops{conv, g}, out + (kStreams + g) * kMaxDrained);
}

// The committed entries (their keys) of every stream, oldest first.
struct log_model {
  std::vector<std::vector<std::uint64_t>> streams =
      std::vector<std::vector<std::uint64_t>>(kAllStreams);
};

std::string stream_label(std::uint32_t s) {
  return s < kStreams ? "hcl_log stream " + std::to_string(s)
                      : "conv_log partition " + std::to_string(s - kStreams);
}

// "" if no tail of log `name` carries a tag ahead of its generation's with entries: such a tail,
// left from before a wrap of the tag, reads empty now but would come back before the next wrap.
std::string no_stale_tail(const gpm::pool& p, const std::string& name, std::uint64_t generation) {
  namespace F = gpm::format::log;
  const char* base = p.host_ptr<char>(p.get(name).offset);
  F::header h;
  std::memcpy(&h, base, sizeof h);
  for (std::uint64_t s = 0; s < h.streams; ++s) {
    std::uint64_t word = 0;
    std::memcpy(&word, base + h.control_offset + s * h.control_stride, sizeof word);
    if ((word >> F::tail_used_bits) > (generation & F::tail_tag_mask) &&
        (word & F::tail_used_mask) != 0) {
      return name + " stream " + std::to_string(s) + " has a tail from before the tag wrapped";
    }
  }
  return "";
}

// Opens both logs of the image and drains them: every stream must hold the model's entries, and
// no tail may come back at a later generation.
std::string check_logs(const std::string& image, const gpm::pool_options& o, const log_model& m) {
  gpm::pool p = gpm::pool::open(image, kLayout, o);
  const gpm::hcl_log hcl = gpm::hcl_log::open(p, "hcl");
  const gpm::conv_log conv = gpm::conv_log::open(p, "conv");
  for (const std::string& bad :
       {no_stale_tail(p, "hcl", hcl.generation()), no_stale_tail(p, "conv", conv.generation())}) {
    if (!bad.empty()) return bad;
  }
  gpm::device_buffer<drained_entry> out(kAllStreams * kMaxDrained);
  gpm::launch(drain_logs, hcl.grid(), hcl.block(), 0, nullptr, hcl.ref(), conv.ref(), out.data());
  if (cudaDeviceSynchronize() != cudaSuccess) return "the drain kernel failed";
  const std::vector<drained_entry> got = gpm::test::to_host(out);
  for (std::uint32_t s = 0; s < kAllStreams; ++s) {
    const std::vector<std::uint64_t>& want = m.streams[s];
    for (std::size_t i = 0; i <= want.size(); ++i) {
      const drained_entry& e = got[s * kMaxDrained + i];
      const std::string which = stream_label(s) + " entry " + std::to_string(i) + " (newest 0)";
      if (i == want.size()) {
        if (e.status != static_cast<std::uint32_t>(log_status::empty)) {
          return which + " should not exist (the stream holds " + std::to_string(want.size()) +
                 " entries) but reads " +
                 std::string(gpm::to_string(static_cast<log_status>(e.status)));
        }
        break;
      }
      const std::uint64_t key = want[want.size() - 1 - i];
      if (e.status != static_cast<std::uint32_t>(log_status::ok)) {
        return which + " reads " + std::string(gpm::to_string(static_cast<log_status>(e.status)));
      }
      if (e.bytes != entry_size(key)) {
        return which + " has " + std::to_string(e.bytes) + " bytes, not " +
               std::to_string(entry_size(key));
      }
      for (std::uint32_t j = 0; j < e.bytes; ++j) {
        if (e.data[j] != entry_byte(key, j))
          return which + " byte " + std::to_string(j) + " differs";
      }
    }
  }
  return "";
}

// Sets a log's generation as 2^24 * k clears would (the workload cannot afford them): the test
// reaches the 24-bit tag's wrap-around this way.
void fast_forward(gpm::pool& p, const std::string& name, std::uint64_t generation) {
  auto* g = p.host_ptr<std::uint64_t>(p.get(name).offset + gpm::format::log::state_offset);
  *g = generation;
  gpm::persist(g, sizeof *g);
}

constexpr std::uint64_t kTag = 1ull << 24;  // generations per wrap of the tail's tag
constexpr int kWrapStep = 6;                // the step at which the tag wraps

// Runs `steps` steps on a new pool; keeps `m` up to date. Until kWrapStep both logs run at
// generation 2^24 (tag 0) with no clear of a whole log; then the generation jumps to 2^25 - 1 and a
// clear makes the tag wrap, so tails written at tag 0 must be rewritten or they come back.
void run_log_workload(const gpm::pool_options& o, log_model& m, std::uint64_t seed, int steps) {
  gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, o);
  gpm::hcl_log hcl = gpm::hcl_log::create(p, "hcl", {kBlocks, kThreads, kLogBytes});
  gpm::conv_log conv = gpm::conv_log::create(p, "conv", kPartitions, kLogBytes);
  gpm::crash_point("workload.between_ops");  // the logs as created
  fast_forward(p, "hcl", kTag);
  fast_forward(p, "conv", kTag);
  std::mt19937_64 rng(seed);
  gpm::device_buffer<std::uint32_t> out(kAllStreams);
  for (int step = 0; step < steps; ++step) {
    gpm::crash_point("workload.between_ops");
    if (step == kWrapStep) {  // then the kernel writes tails at the last tag before the wrap
      fast_forward(p, "hcl", 2 * kTag - 1);
      fast_forward(p, "conv", 2 * kTag - 1);
      for (auto& s : m.streams) s.clear();  // tails of older tags read empty
    }
    gpm::launch(log_step, hcl.grid(), hcl.block(), 0, nullptr, hcl.ref(), conv.ref(), seed, step,
                out.data());
    const std::vector<std::uint32_t> st = gpm::test::statuses(out);
    for (std::uint32_t s = 0; s < kAllStreams; ++s) {
      const std::uint64_t key = entry_key(seed, step, s);
      const auto status = static_cast<log_status>(st[s]);
      std::vector<std::uint64_t>& stream = m.streams[s];
      if (status == log_status::full) continue;  // nothing written
      ASSERT_TRUE(status == log_status::ok || (status == log_status::empty && stream.empty()))
          << stream_label(s) << " step " << step << ": " << gpm::to_string(status);
      if (status == log_status::empty) continue;
      switch (op_of(key)) {
        case log_op::insert: stream.push_back(key); break;
        case log_op::remove:
          ASSERT_FALSE(stream.empty()) << stream_label(s) << " removed from an empty stream";
          stream.pop_back();
          break;
        case log_op::clear: stream.clear(); break;
      }
    }
    const std::uint64_t r = rng() % 8;
    if (step == kWrapStep || (step > kWrapStep && r == 0)) {
      // Each log is empty from its generation store on, before its crash point
      // log.clear.tag_wrapped.
      for (std::uint32_t s = 0; s < kStreams; ++s) m.streams[s].clear();
      hcl.clear();
      for (std::uint32_t s = kStreams; s < kAllStreams; ++s) m.streams[s].clear();
      conv.clear();
    } else if (r == 1) {
      const std::uint32_t s = static_cast<std::uint32_t>(rng() % kAllStreams);
      if (s < kStreams) {
        hcl.clear(s / kThreads, s % kThreads);
      } else {
        conv.clear(s - kStreams);
      }
      m.streams[s].clear();
    }
  }
  ASSERT_EQ(hcl.generation() >> 24, 2u) << "the workload never crossed the tag's wrap-around";
}

run_result check_log_workload(std::uint64_t seed, int steps, const std::string& disabled_site) {
  gpm::test::scratch_dirs d("log-crash-image");
  const gpm::pool_options o = options_for(d);
  log_model m;
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return check_logs(image, o, m); },
      checker_options(d, {"log.clear.tag_wrapped", "workload.between_ops"}, seed, disabled_site));
  run_log_workload(o, m, seed, steps);
  return {checker.failure(), checker.stats()};
}

const std::vector<std::string> kLogSites = {
    "log.create.generation",
    "log.create.header",
    "log.append.entry",
    "log.append.tail",
    "log.remove.tail",
    "log.clear_stream.tail",
    "log.clear_stream.host_tail",
    "log.clear.generation",
    "log.clear.wrapped_tail",
};

TEST(LogCrashImage, EveryImageOfTheLogsRecovers) {
  const int trials = gpm::test::crash_trials(2);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const run_result r = check_log_workload(seed, trials > 2 ? 120 : 40, "");
    ASSERT_FALSE(r.failure) << "seed " << seed << ": " << r.failure->describe();
    EXPECT_GT(r.stats.images, r.stats.explorations / 2) << "seed " << seed;
    std::printf("seed %llu: %llu crash points explored, %llu images, at most %zu dirty lines\n",
                static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(r.stats.explorations),
                static_cast<unsigned long long>(r.stats.images), r.stats.most_dirty_lines);
    for (const std::string& site : kLogSites) {
      EXPECT_TRUE(r.stats.site_hits.contains(site)) << site << " was never reached";
    }
  }
}

class LogPersistSite : public ::testing::TestWithParam<std::string> {};

TEST_P(LogPersistSite, RemovalIsCaught) {
  const run_result r = check_log_workload(1, 40, GetParam());
  EXPECT_TRUE(r.stats.site_hits.contains(GetParam())) << "the workload never reached the site";
  ASSERT_TRUE(r.failure) << "no crash image failed without " << GetParam() << " (" << r.stats.images
                         << " images)";
  std::printf("without %s: %s\n", GetParam().c_str(), r.failure->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(Logs, LogPersistSite, ::testing::ValuesIn(kLogSites),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

// ---- undo transactions: undo_tx (hcl_log) and conv_undo_tx (conv_log) ----------------------

constexpr std::uint32_t kElems = 8 * kStreams;  // element i belongs to thread i % kStreams
constexpr std::uint32_t kKernelsPerBatch = 2;

// Room for a whole batch: every element a thread owns saved by every kernel; a partition of a
// conv_undo_tx holds the saves of one block's threads (block b logs to partition b).
constexpr std::uint64_t kThreadBatchBytes =
    kKernelsPerBatch * (kElems / kStreams) * gpm::undo_tx::entry_footprint(sizeof(std::uint64_t));
static_assert(kPartitions == kBlocks);
gpm::hcl_geometry undo_shape(gpm::hcl_log*) { return {kBlocks, kThreads, kThreadBatchBytes}; }
gpm::conv_partitions undo_shape(gpm::conv_log*) {
  return {kPartitions, kThreads * kThreadBatchBytes};
}

// Whether kernel k of batch b updates element i, and to what.
__host__ __device__ std::uint64_t update_key(std::uint64_t seed, std::uint64_t b, std::uint32_t k,
                                             std::uint32_t i) {
  return gpm::mix64(gpm::mix64(seed ^ 0x756e646full) ^ (b << 20) ^ (std::uint64_t{k} << 16) ^ i);
}
__host__ __device__ bool updates(std::uint64_t key) { return key % 2 == 0; }

template <class Log>
__global__ void update_step(gpm::basic_undo_tx_ref<Log> tx, gpm::pool_ref pool, std::uint64_t off,
                            std::uint64_t seed, std::uint64_t b, std::uint32_t k) {
  std::uint64_t* a = pool.ptr<std::uint64_t>(off);
  for (auto i = static_cast<std::uint32_t>(gpm::tile_index()); i < kElems; i += kStreams) {
    const std::uint64_t key = update_key(seed, b, k, i);
    if (updates(key) && tx.update(&a[i], key) != log_status::ok) return;
  }
}

// The committed state and the published mark. A crash image must show the mark of `phase`, and
// once recovered, `committed` batches and the array they left.
struct undo_model {
  enum class phase { idle, active, recovering };
  phase at = phase::idle;
  std::uint64_t committed = 0;
  std::vector<std::uint64_t> array = std::vector<std::uint64_t>(kElems, 0);
};

template <class Log>
std::string check_undo(const std::string& image, const gpm::pool_options& o, const undo_model& m) {
  gpm::pool p = gpm::pool::open(image, kLayout, o);
  auto tx = gpm::basic_undo_tx<Log>::open(p, "tx");
  const std::string seen = "the image's batch record (active " + std::to_string(tx.active()) +
                           ", committed " + std::to_string(tx.committed()) + ")";
  if (tx.committed() != m.committed) {
    return seen + " does not count the " + std::to_string(m.committed) + " committed batches";
  }
  // The mark is durable once begin(), commit() or recover() has set it: recover() clearing it may
  // be cut short (recovering: either), never undone.
  if (m.at != undo_model::phase::recovering && tx.active() != (m.at == undo_model::phase::active)) {
    return seen + (tx.active() ? " shows a batch active that ended" : " lost the active batch");
  }
  tx.recover();
  if (tx.active() || tx.committed() != m.committed) return "recover() left " + seen;
  const auto* a = p.host_ptr<std::uint64_t>(p.get("array").offset);
  for (std::uint32_t i = 0; i < kElems; ++i) {
    if (a[i] != m.array[i]) {
      return "after recover(), element " + std::to_string(i) + " is not the state after batch " +
             std::to_string(m.committed);
    }
  }
  return "";
}

// Runs `batches` batches; each commits or, one time in four, is undone by recover().
template <class Log>
void run_undo_workload(const gpm::pool_options& o, undo_model& m, std::uint64_t seed, int batches) {
  gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, o);
  auto tx = gpm::basic_undo_tx<Log>::create(p, "tx", undo_shape(static_cast<Log*>(nullptr)));
  const std::uint64_t off = p.allocate("array", kElems * sizeof(std::uint64_t));  // zeros
  std::mt19937_64 rng(seed);
  for (int b = 1; b <= batches; ++b) {
    gpm::crash_point("workload.between_ops");
    tx.begin();
    m.at = undo_model::phase::active;
    std::vector<std::uint64_t> next = m.array;
    for (std::uint32_t k = 0; k < kKernelsPerBatch; ++k) {
      gpm::launch(update_step<Log>, kBlocks, kThreads, 0, nullptr, tx.ref(), p.ref(), off, seed,
                  std::uint64_t(b), k);
      gpm::test::sync_ok();
      for (std::uint32_t i = 0; i < kElems; ++i) {
        if (updates(update_key(seed, b, k, i))) next[i] = update_key(seed, b, k, i);
      }
      gpm::crash_point("workload.between_ops");
    }
    if (rng() % 4 == 0) {
      m.at = undo_model::phase::recovering;
      ASSERT_TRUE(tx.recover());
    } else {
      // commit() reaches no crash point before its mark is durable.
      m.at = undo_model::phase::idle;
      m.committed += 1;
      m.array = next;
      tx.commit();
    }
    m.at = undo_model::phase::idle;
  }
}

const std::vector<std::string> kUndoPoints = {
    "undo_tx.begin.log_cleared", "undo_tx.commit.unmarked", "undo_tx.recover.rolled_back",
    "undo_tx.recover.unmarked", "workload.between_ops"};

template <class Log>
run_result check_undo_workload(std::uint64_t seed, int batches, const std::string& disabled_site) {
  gpm::test::scratch_dirs d("undo-crash-image");
  const gpm::pool_options o = options_for(d);
  undo_model m;
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return check_undo<Log>(image, o, m); },
      checker_options(d, kUndoPoints, seed, disabled_site));
  run_undo_workload<Log>(o, m, seed, batches);
  return {checker.failure(), checker.stats()};
}

const std::vector<std::string> kUndoSites = {
    "undo_tx.create.header",
    "undo_tx.begin.mark",
    "undo_tx.update.data",
    "undo_tx.commit.mark",
    "undo_tx.roll_back.data",
    "undo_tx.recover.mark",
    // the log's sites the transactions rely on
    "log.create.header",
    "log.append.entry",
    "log.append.tail",
    "log.clear.generation",
};

template <class Log>
void expect_every_image_recovers(const char* what) {
  const int trials = gpm::test::crash_trials(2);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const run_result r = check_undo_workload<Log>(seed, trials > 2 ? 60 : 16, "");
    ASSERT_FALSE(r.failure) << what << " seed " << seed << ": " << r.failure->describe();
    EXPECT_GT(r.stats.images, r.stats.explorations / 2) << "seed " << seed;
    std::printf("%s seed %llu: %llu crash points explored, %llu images, at most %zu dirty lines\n",
                what, static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(r.stats.explorations),
                static_cast<unsigned long long>(r.stats.images), r.stats.most_dirty_lines);
    for (const std::string& site : kUndoSites) {
      EXPECT_TRUE(r.stats.site_hits.contains(site)) << site << " was never reached";
    }
  }
}

TEST(LogCrashImage, EveryImageOfUndoTxRecovers) {
  expect_every_image_recovers<gpm::hcl_log>("undo_tx");
}
TEST(LogCrashImage, EveryImageOfConvUndoTxRecovers) {
  expect_every_image_recovers<gpm::conv_log>("conv_undo_tx");
}

class UndoPersistSite : public ::testing::TestWithParam<std::string> {};

template <class Log>
void expect_caught(const std::string& site, const char* what) {
  const run_result r = check_undo_workload<Log>(1, 16, site);
  EXPECT_TRUE(r.stats.site_hits.contains(site)) << what << " never reached the site";
  ASSERT_TRUE(r.failure) << "no crash image of " << what << " failed without " << site << " ("
                         << r.stats.images << " images)";
  std::printf("%s without %s: %s\n", what, site.c_str(), r.failure->describe().c_str());
}

TEST_P(UndoPersistSite, RemovalIsCaught) {
  expect_caught<gpm::hcl_log>(GetParam(), "undo_tx");
  expect_caught<gpm::conv_log>(GetParam(), "conv_undo_tx");
}

INSTANTIATE_TEST_SUITE_P(UndoTx, UndoPersistSite, ::testing::ValuesIn(kUndoSites),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

}  // namespace
