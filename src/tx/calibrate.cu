// gpm::tx_calibrate: the adaptive switch's threshold, measured on this machine with the Helper
// Warps paper's Fig. 6 micro-benchmark (TPDS'20 §5.2) instead of copied from the paper, whose
// 200 MB/s belonged to its emulated NVRAM. The sweep runs on a scratch heap in the caller's pool
// and frees it afterwards, even when a step throws.
#include <gpm/tx/tx_heap.cuh>

#include <algorithm>
#include <limits>
#include <mutex>

#include <gpm/pool/pool.hpp>

namespace gpm {

namespace {

constexpr char kScratch[] = "gpm.tx.calibrate";
constexpr std::uint32_t kMaxWrites = 32;  // the write set run() gets below

// Fig. 6: each thread's transactions write `writes` words of its own, rep after rep.
struct write_test {
  std::uint32_t writes;
  std::uint32_t reps;
  __device__ void operator()(tx_ref tx) const {
    const std::uint64_t me = tx.worker_index();
    for (std::uint32_t rep = 0; rep < reps; ++rep) {
      tx.run<kMaxWrites, kMaxWrites>([&](auto& t) {
        for (std::uint32_t i = 0; i < writes; ++i) {
          t.write(me * writes + i, static_cast<std::uint32_t>(me));
        }
      });
    }
  }
};

// Frees the scratch heap's pool object when the sweep ends, however it ends.
struct scratch_object {
  pool& p;
  explicit scratch_object(pool& owner) : p(owner) {
    if (p.find(kScratch)) p.free(kScratch);  // left behind by a sweep that crashed
  }
  ~scratch_object() {
    if (p.find(kScratch)) p.free(kScratch);
  }
  scratch_object(const scratch_object&) = delete;
  scratch_object& operator=(const scratch_object&) = delete;
};

struct measured {
  double seconds = 0;
  double bandwidth = 0;
};

// One launch of `threads` writers on the scratch heap in `mode`, after a warm-up launch.
measured run_point(pool& p, tx_mode mode, const tx_calibration& c, std::uint64_t threads) {
  tx_options o;
  o.mode = mode;
  o.max_threads = c.max_threads;
  tx_heap heap = tx_heap::open(p, kScratch, o);
  const std::uint32_t workers =
      static_cast<std::uint32_t>(threads < c.workers_per_block ? threads : c.workers_per_block);
  const auto blocks = static_cast<std::uint32_t>(threads / workers);
  const write_test body{c.writes, c.reps};
  stream s;
  heap.launch(blocks, workers, body, s);
  heap.sync(s);
  const std::uint64_t before = heap.stats().persisted_bytes;
  event start, stop;
  start.record(s);
  heap.launch(blocks, workers, body, s);
  stop.record(s);
  heap.sync(s);
  measured m;
  m.seconds = static_cast<double>(stop.elapsed_ms_since(start)) * 1e-3;
  const auto bytes = static_cast<double>(heap.stats().persisted_bytes - before);
  m.bandwidth = m.seconds > 0 ? bytes / m.seconds : 0;
  return m;
}

// The median launch of `runs` by time (the upper one of an even count).
measured median(std::vector<measured> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const measured& a, const measured& b) { return a.seconds < b.seconds; });
  return runs[runs.size() / 2];
}

}  // namespace

tx_calibration_result tx_calibrate_sweep(pool& p, const tx_calibration& c) {
  require(c.writes >= 1 && c.writes <= kMaxWrites, "tx_calibrate: writes must be between 1 and " +
                                                       std::to_string(kMaxWrites) + ", got " +
                                                       std::to_string(c.writes));
  require(c.reps >= 1, "tx_calibrate: reps must be at least 1");
  require(c.repeats >= 1, "tx_calibrate: repeats must be at least 1");
  require(c.workers_per_block >= 32 && c.workers_per_block % 32 == 0 && c.workers_per_block <= 512,
          "tx_calibrate: workers_per_block must be a multiple of 32 between 32 and 512, got " +
              std::to_string(c.workers_per_block));
  require(c.min_threads >= 32 && c.min_threads % 32 == 0 && c.min_threads <= c.max_threads &&
              c.max_threads <= (1ull << 22),
          "tx_calibrate: the sweep needs 32 <= min_threads <= max_threads <= 2^22, min_threads a "
          "multiple of 32; got " +
              std::to_string(c.min_threads) + " and " + std::to_string(c.max_threads));
  // Every block's log holds a whole launch, so the host's applying never throttles the kernel.
  const std::uint64_t blocks = (c.max_threads + c.workers_per_block - 1) / c.workers_per_block;
  const std::uint64_t record_bytes = detail::tx::record_chunks(c.writes) * detail::tx::kChunkBytes;
  const tx_geometry g{.words = c.max_threads * c.writes,
                      .logs = static_cast<std::uint32_t>(blocks),
                      .log_bytes = std::uint64_t{c.reps} * c.workers_per_block * record_bytes};
  const scratch_object scratch(p);
  tx_options create_options;
  create_options.mode = tx_mode::direct;
  create_options.max_threads = c.max_threads;
  tx_heap::create(p, kScratch, g, create_options);
  tx_calibration_result r;
  for (std::uint64_t threads = c.min_threads; threads <= c.max_threads; threads *= 2) {
    // Thread counts past a block round down to whole blocks.
    const std::uint64_t whole = threads < c.workers_per_block
                                    ? threads
                                    : threads / c.workers_per_block * c.workers_per_block;
    // The modes alternate, so a drift of the machine reaches both alike; one heap is open at a
    // time.
    std::vector<measured> direct_runs, helpers_runs;
    for (std::uint32_t i = 0; i < c.repeats; ++i) {
      direct_runs.push_back(run_point(p, tx_mode::direct, c, whole));
      helpers_runs.push_back(run_point(p, tx_mode::helpers, c, whole));
    }
    const measured direct = median(direct_runs);
    const measured helpers = median(helpers_runs);
    r.points.push_back(
        {whole, direct.seconds, helpers.seconds, direct.bandwidth, helpers.bandwidth});
  }
  r.threshold = tx_calibration_threshold(r.points);
  return r;
}

double tx_calibration_threshold(const std::vector<tx_calibration_point>& points) {
  const auto helpers_win = [&](std::size_t i) {
    return points[i].helpers_seconds < points[i].direct_seconds;
  };
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (helpers_win(i) && (i + 1 == points.size() || helpers_win(i + 1))) {
      return points[i].direct_bandwidth;
    }
  }
  return std::numeric_limits<double>::infinity();
}

double tx_calibrate(pool& p, const tx_calibration& c) {
  static std::mutex mutex;
  static std::optional<double> threshold;
  const std::lock_guard lock(mutex);
  if (!threshold) threshold = tx_calibrate_sweep(p, c).threshold;
  return *threshold;
}

}  // namespace gpm
