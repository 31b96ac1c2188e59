// Speed of the tx reproducer on one host core (host backend, Google Benchmark): how many redo
// records per second it applies to the home image, reading them from a heap's logs in pool memory
// as kernels leave them (ATM A1's shape: 2-pair records, 512 logs, 100K-word heap). The logs are
// written here, on the host, in the on-media format, so that only the reproducer is timed:
//   BM_Pass    records appended to the logs of an open heap, then durable_seq() until every one is
//              applied (what tx_heap::sync waits for after a kernel: the time to durable)
//   BM_Replay  the same records left in the logs of a closed heap, replayed by tx_heap::open
// Arguments: group width (1: plain records, as warp-aggregated commits leave them end to end;
// > 1: HCL-striped groups of that many members) and the longest run of consecutive sequence
// numbers one log receives before another log's turn (1: every log interleaved with the others).
// Real time and the process's CPU time (the reproducer's thread included) are reported: on a
// loaded machine the CPU time is the figure for "one host core".
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gpm/pool/pool.hpp>
#include <gpm/tx/detail/format.hpp>
#include <gpm/tx/tx_heap.cuh>

namespace {

namespace F = gpm::detail::tx;

constexpr std::uint64_t kRecords = 1 << 20;
constexpr std::uint32_t kLogs = 512;
constexpr std::uint64_t kWords = 100'000;
constexpr std::uint32_t kPairs = 2;
// Each log holds twice its average share of a batch: enough for the random spread of runs.
constexpr std::uint64_t kLogBytes =
    (2 * kRecords / kLogs * F::record_chunks(kPairs) * F::kChunkBytes + 4095) / 4096 * 4096;

// The host's reproducer alone: without gpu_replay = false, durable_seq() and open() would apply
// with the replay kernels (on this backend, emulated ones).
gpm::tx_options options() {
  gpm::tx_options o;
  o.mode = gpm::tx_mode::direct;
  o.max_threads = 32;
  o.gpu_replay = false;
  return o;
}

// A pool in the PM directory ($GPMKIT_PM_DIR, else /dev/shm/gpmkit) holding heap "h", removed at
// the end.
class bench_heap {
 public:
  bench_heap()
      : path_("tx-reproducer-bench-" + std::to_string(getpid()) + ".pool"),
        pool_(gpm::pool::create(path_, pool_bytes(), "tx-reproducer-bench", pool_options())) {
    gpm::tx_heap::create(pool_, "h", {kWords, kLogs, kLogBytes}, options());
  }
  ~bench_heap() {
    pool_.close();
    gpm::pool::remove(path_, pool_options());
  }
  gpm::pool& pool() { return pool_; }
  char* object() { return pool_.host_ptr<char>(pool_.get("h").offset); }

 private:
  static std::uint64_t pool_bytes() {
    return (kLogs * (kLogBytes + 128) + kWords * 4 + (8 << 20)) / 4096 * 4096;
  }
  static gpm::pool_options pool_options() {
    gpm::pool_options o;
    o.notice = [](const std::string&) {};
    return o;
  }
  std::string path_;
  gpm::pool pool_;
};

// Writes batches of records into a heap's logs as commits would: sequence numbers in runs, each
// run into a random log, in sequence order within each log.
class log_writer {
 public:
  log_writer(char* object, std::uint32_t width, std::uint32_t max_run)
      : object_(object), width_(width), max_run_(max_run), next_(kLogs, 0) {
    std::memcpy(&header_, object, sizeof header_);
    layout_ = {header_.words, header_.log_chunks, header_.logs};
  }

  // Positions restart at 0 (a new epoch: recovery empties the logs).
  void restart() { std::fill(next_.begin(), next_.end(), 0); }

  // Writes records first_seq .. first_seq + kRecords - 1, the first one last: until it is there,
  // nothing can be applied, so a reproducer running meanwhile applies nothing.
  void write_batch(std::uint64_t first_seq) {
    const std::uint64_t epoch = root().epoch;
    std::optional<run> first;
    for (std::uint64_t seq = first_seq; seq < first_seq + kRecords;) {
      const std::uint64_t len =
          std::min<std::uint64_t>(1 + rng_() % max_run_, first_seq + kRecords - seq);
      const auto log = static_cast<std::uint32_t>(rng_() % kLogs);
      const run r{log, next_[log], seq, len};
      next_[log] += chunks_of(len);
      if (seq == first_seq) {
        first = r;
      } else {
        write_run(r, epoch);
      }
      seq += len;
    }
    write_run(*first, epoch);
  }

 private:
  struct run {
    std::uint32_t log;
    std::uint64_t pos;  // stream position of its first chunk
    std::uint64_t seq;
    std::uint64_t len;
  };
  std::uint64_t chunks_of(std::uint64_t len) const { return F::record_chunks(kPairs) * len; }

  // Plain records end to end, or striped groups of width_ (the last one narrower).
  void write_run(const run& r, std::uint64_t epoch) {
    std::uint64_t pos = r.pos;
    for (std::uint64_t i = 0; i < r.len; i += width_) {
      const std::uint64_t group = std::min<std::uint64_t>(width_, r.len - i);
      for (std::uint64_t m = 0; m < group; ++m) {
        std::uint32_t words[kPairs], values[kPairs];
        for (std::uint32_t k = 0; k < kPairs; ++k) {
          words[k] = static_cast<std::uint32_t>(rng_() % kWords);
          values[k] = static_cast<std::uint32_t>(rng_());
        }
        const bool striped = width_ > 1;
        F::record_source rec{r.seq + i + m,
                             kPairs,
                             words,
                             values,
                             0,
                             striped ? static_cast<std::uint32_t>(group) : 0u,
                             striped ? static_cast<std::uint32_t>(m) : 0u};
        const std::uint64_t at = striped ? pos + m : pos + m * F::record_chunks(kPairs);
        rec.checksum = F::record_checksum(
            rec, kPairs, F::record_seed(F::salt_of(header_), epoch, r.log, at));
        store(r.log, at, rec, striped ? group : 1);
      }
      pos += chunks_of(group);
    }
  }

  // A reproducer may read the logs meanwhile: slots are stored atomically, as kernels do.
  void store(std::uint32_t log, std::uint64_t pos, const F::record_source& rec,
             std::uint64_t stride) const {
    auto* data = reinterpret_cast<std::uint64_t*>(object_ + layout_.log_offset()) +
                 2 * layout_.log_chunks * log;
    for (std::uint64_t j = 0; j < F::record_chunks(rec.count); ++j) {
      const std::uint64_t at = (pos + j * stride) % layout_.log_chunks;
      std::atomic_ref<std::uint64_t>(data[2 * at]).store(rec.slot(2 * j));
      std::atomic_ref<std::uint64_t>(data[2 * at + 1]).store(rec.slot(2 * j + 1));
    }
  }

  F::root_record root() const {
    const auto* r = reinterpret_cast<const F::root_record*>(object_ + F::kRootOffset);
    const bool second_valid = r[1].checksum == F::root_checksum(r[1]);
    return second_valid && (r[0].checksum != F::root_checksum(r[0]) || r[1].seq > r[0].seq)
               ? r[1]
               : r[0];
  }

  char* object_;
  std::uint32_t width_;
  std::uint32_t max_run_;
  F::heap_header header_{};
  F::heap_layout layout_{};
  std::vector<std::uint64_t> next_;  // per log: the next stream position
  std::mt19937_64 rng_{42};
};

void BM_Pass(benchmark::State& state) {
  bench_heap b;
  log_writer w(b.object(), static_cast<std::uint32_t>(state.range(0)),
               static_cast<std::uint32_t>(state.range(1)));
  gpm::tx_heap heap = gpm::tx_heap::open(b.pool(), "h", options());
  std::uint64_t applied = 0;
  for (auto _ : state) {
    state.PauseTiming();
    w.write_batch(applied + 1);
    state.ResumeTiming();
    // Polled, not spun on, so that process CPU time counts the reproducer's work only.
    while (heap.durable_seq() < applied + kRecords) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    applied += kRecords;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}

void BM_Replay(benchmark::State& state) {
  bench_heap b;
  log_writer w(b.object(), static_cast<std::uint32_t>(state.range(0)),
               static_cast<std::uint32_t>(state.range(1)));
  std::uint64_t applied = 0;
  for (auto _ : state) {
    state.PauseTiming();
    w.restart();
    w.write_batch(applied + 1);
    state.ResumeTiming();
    const gpm::tx_heap heap = gpm::tx_heap::open(b.pool(), "h", options());
    if (heap.last_recovery().replayed != kRecords) state.SkipWithError("records were not replayed");
    applied += kRecords;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}

// {group width, longest run}: warp-aggregated plain records, fully interleaved plain records,
// HCL-striped groups of 32.
void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 32})->Args({1, 1})->Args({32, 32});
  b->ArgNames({"width", "run"})->Unit(benchmark::kMillisecond)->Iterations(3);
  // The reproducer's own thread does most of a pass's work: CPU time is the whole process's.
  b->UseRealTime()->MeasureProcessCPUTime();
}

BENCHMARK(BM_Pass)->Apply(shapes);
BENCHMARK(BM_Replay)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
