// The host I/O threads of a gpm::ooc mapping. Each thread polls the request queue in pinned host
// memory (claiming requests among the threads in host memory), serves a request with copy-engine
// transfers between the GPU cache slot and the host cache on its own non-blocking stream, and
// answers it once they are done, with up to kServeDepth requests under way; between requests it
// reads ahead of sequential streams of misses and of the lines kernels touch(). It
// backs off from polling to sleeping when idle, so idle mappings cost no CPU and, on the host
// emulator, the kernels' threads and the I/O threads share the cores.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <gpm/ooc/detail/protocol.hpp>
#include <gpm/ooc/status.hpp>
#include <gpm/platform/runtime.hpp>

#include "host_cache.hpp"
#include "staging.hpp"

namespace gpm::detail::ooc {

// load_resident() reads, and store_resident() writes, in runs of up to this many bytes: large
// enough for reads at the disk's sequential bandwidth, small enough that the first copy to the
// GPU starts early in a large mapping.
inline constexpr std::uint64_t kResidentRunBytes = 16ull << 20;
// A resident load from one O_DIRECT file reads it alone, in runs of this many bytes: the chunked
// pipeline's piece, at which one reader read a virtual disk fastest.
inline constexpr std::uint64_t kDirectLoadRunBytes = 8ull << 20;
// Requests one I/O thread has under way at most: it issues each claimed request's copy to the GPU
// at once and answers the request when an event recorded after the copy shows it done, so the
// copies of several misses follow each other on the copy engine instead of each waiting for the
// answer to the one before (a copy and a wait per line cost about 10 us besides the transfer on
// an H100, ooc_ablation_fill).
inline constexpr std::uint32_t kServeDepth = 8;  // fewer in a small host cache (serve_depth)

// Read-ahead reads up to this many bytes of queued consecutive lines at once
// (host_cache::read_ahead), unless mapping_options::read_ahead_run_bytes says otherwise.
inline constexpr std::uint64_t kReadAheadRunBytes = 16ull << 20;

// Where the GPU cache lives, as the host addresses it with copies.
struct gpu_cache_geometry {
  std::byte* lines = nullptr;
  std::uint32_t* mask = nullptr;  // mode::write
  std::uint64_t line_bytes = 0;
  std::uint32_t mask_words = 0;
  gpm::ooc::mode mode = gpm::ooc::mode::read_write;
};

struct io_config {
  std::uint32_t threads = 2;
  // Whether the threads start, to serve misses and read ahead; a resident mapping has neither
  // (its load and write-back run on up to `threads` workers, when they run).
  bool serve = true;
  int device = 0;
  bool read_ahead = true;
  std::uint32_t read_ahead_window = 2;
  std::uint32_t read_ahead_run = 1;  // lines one read-ahead read takes at most
  // The ring of lines kernels touch() (cache_view::hints), host address.
  const std::uint64_t* hints = nullptr;
  std::uint32_t hint_slots = 0;
  // How long an idle thread polls after its last work before it sleeps between polls.
  std::chrono::microseconds idle_poll{200};
};

struct io_counters {
  std::atomic<std::uint64_t> gpu_evictions{0};
  std::atomic<std::uint64_t> bytes_to_gpu{0};
  std::atomic<std::uint64_t> bytes_from_gpu{0};
  std::atomic<std::uint64_t> touch_hints{0};  // lines taken from the hint ring
  // The resident load's file reads (load_resident): how many, and their summed wall time.
  std::atomic<std::uint64_t> resident_reads{0};
  std::atomic<std::uint64_t> resident_read_ns{0};
  // GPU misses served (fills from the host cache; zero fills not counted) and the summed wall time
  // each took, from its start to its copy's end: host cache lookup, a file read on a host miss,
  // the copy (requests under way together overlap).
  std::atomic<std::uint64_t> fills{0};
  std::atomic<std::uint64_t> fill_ns{0};
};

class io_service {
 public:
  // What one thread needs to copy lines: a stream and, for mode::write, a staging area for a line
  // and its mask, and a line of zeros (also where the threads fill lines that can only be zeros,
  // host_cache::may_fill_zeros). Slots and masks are zeroed by copying those zeros, never
  // with cudaMemsetAsync: a memset of device memory may run on the SMs, which the kernel that
  // waits for it can occupy entirely, while copies from pinned memory run on the copy engines.
  // Both buffers come from the process's pool (staging.hpp): pinned and unpinned per mapping, they
  // cost a small mapping more than its data.
  struct channel {
    stream copies{true};  // non-blocking: never waits for the kernels on the default stream
    std::unique_ptr<staging_buffer> staging;
    std::unique_ptr<staging_buffer> zeros;
  };

  io_service(const io_config& config, const gpu_cache_geometry& gpu, host_cache& cache,
             request* requests, response* responses, std::uint32_t slots);
  ~io_service();  // stops and joins the threads
  io_service(const io_service&) = delete;
  io_service& operator=(const io_service&) = delete;

  channel make_channel() const;
  // Copies GPU cache slot `slot`, holding dirty `line`, into the host cache (and clears its mask).
  // Throws gpm::error when the host cache has no room (disk full) or a copy fails.
  void copy_out(channel& ch, std::uint32_t slot, std::uint64_t line, bool whole);
  // The resident load at map time: lines [0, lines) of the mapping into GPU cache slots [0, lines),
  // read in runs of up to kResidentRunBytes by as many loaders as I/O threads and runs (the
  // calling thread one of them), each into its staging buffer (staging.hpp; two halves in turn
  // when it reads more than one run), so that the file is read by several threads at once, each
  // while its previous run is copied to the GPU. One O_DIRECT file (host_cache::direct_file) is
  // read by the calling thread alone, in order, in runs of kDirectLoadRunBytes, each while the
  // one before is copied. Throws gpm::error (io, out_of_memory).
  void load_resident(std::uint64_t lines);
  // A resident read_write mapping's write-back at sync: the GPU cache's slots `lines` (ascending;
  // slot l holds line l) to the files, in runs of consecutive lines (up to kResidentRunBytes),
  // by as many writers as I/O threads and runs (the calling thread one of them), each copying a
  // run from the GPU into one half of its staging buffer while it writes the run before to the
  // files. written[i] becomes 1 once lines[i] is in the file. Throws gpm::error (io) after every
  // writer stopped; lines not written then are still only in the GPU cache.
  void store_resident(const std::vector<std::uint64_t>& lines, std::vector<char>& written);
  // Queues lines [first, last] for reading ahead into the host cache.
  void schedule_read_ahead(std::uint64_t first, std::uint64_t last);

  const io_counters& counters() const { return counters_; }
  std::string last_error() const;

 private:
  void run();
  // A worker of the resident load and write-back: its stream and an event per staging half, kept
  // for the mapping's life (a load or write-back made them anew each time).
  struct resident_worker {
    stream copies{true};
    event copied[2];
  };
  // Lines per run of `bytes` (at least one).
  std::uint64_t run_lines(std::uint64_t bytes) const;
  // Runs work(worker, staging, failed) for `runs` runs of at most `run_bytes` each, on as many
  // threads as I/O threads, runs and `max_workers` allow (the calling thread as worker 0), each
  // with its own resident_worker and a staging buffer of the pool: half k % 2 of a worker's k-th
  // run lies at staging + k % 2 * run_bytes (one half only for a single run). `failed` is set once
  // one has thrown, and the first failure is rethrown after all have returned.
  void on_workers(
      std::uint64_t runs, std::uint64_t run_bytes, std::uint64_t max_workers,
      const std::function<void(resident_worker&, std::byte*, const std::atomic<bool>&)>& work);
  struct flights;
  // Claims and serves the requests posted, up to kServeDepth under way at once, and answers every
  // one it claimed before it returns; false if there was none.
  bool serve_requests(channel& ch, flights& fl, std::uint32_t& start);
  // Requests one thread may have under way now (1 to kServeDepth): as many as the host cache's
  // entries allow without all of them ending up pinned by requests under way. Never less than
  // before (the entries only grow). Takes the cache's lock.
  std::uint32_t serve_depth() const;
  // Starts serving request slot k: the eviction's copy out (waited for), the fill's copy issued.
  void begin(channel& ch, flights& fl, std::uint32_t k, std::uint64_t seq, const request& r);
  // Answers the oldest request under way once its copy is done; with `wait` false, only if it is
  // done already (returns whether it answered).
  bool answer_oldest(flights& fl, bool wait);
  // Runs work() (true: it did something) on this thread in the background, off the kernels'
  // misses, if ready() (called under ra_m_) and a background place and the disk's are free;
  // records what work() throws, prefixed with `what`.
  template <class Ready, class Work>
  bool in_background(Ready&& ready, Work&& work, const char* what);
  // One read-ahead read of the queued lines.
  bool read_ahead_one();
  // One run of dirty host-cache lines written back (host_cache::write_behind).
  bool write_behind_one();
  // Queues the lines posted to the hint ring since the last call for read-ahead.
  bool take_hints();
  // Sequential-stream detection: line - 1 among the recent misses means a stream; queues the
  // next read_ahead_window lines.
  void note_miss(std::uint64_t line);
  void record(const std::string& what);
  using clock_type = std::chrono::steady_clock;
  // A claimed request under way: what it got so far, and the host cache entry its copy reads.
  struct flight {
    std::uint32_t k = 0;
    std::uint64_t seq = 0;
    std::uint32_t result = 0;
    std::uint32_t entry = host_cache::kNone;  // pinned for the fill's copy
    bool copying = false;                     // a copy was issued, then `copied`
    bool fetch = false;                       // a fill from the host cache (not zeros)
    std::uint64_t line = 0;                   // the line it fills
    clock_type::time_point start;
  };
  // One I/O thread's requests under way, oldest first (a ring), each with the event recorded after
  // its copy.
  struct flights {
    std::array<flight, kServeDepth> f;
    std::array<event, kServeDepth> copied;
    std::uint32_t head = 0, count = 0;
    // serve_depth() when last asked: the host cache's entries only grow, so once it reaches
    // kServeDepth the cache's lock is no longer taken to ask again.
    std::uint32_t depth = 0;
  };
  // Between polls with nothing to do: yields for a while after the last work, then sleeps.
  void idle_wait(clock_type::time_point last_work, std::chrono::microseconds& sleep);
  void stop();  // wakes and joins the threads

  io_config config_;
  gpu_cache_geometry gpu_;
  host_cache& cache_;
  request* requests_;
  response* responses_;
  std::uint32_t slots_;
  std::vector<std::atomic<std::uint64_t>> claimed_;  // per slot: the last seq a thread took
  io_counters counters_;

  std::mutex ra_m_;
  std::deque<std::uint64_t> ra_queue_;
  std::uint32_t background_ = 0;  // threads in the background now (under ra_m_)
  std::unordered_set<std::uint64_t> ra_queued_;
  std::vector<std::uint64_t> recent_;  // ring of recent misses
  std::uint64_t disk_;                 // host_cache::disk(), for the background I/O's disk_gate
  std::size_t recent_next_ = 0;
  // One past the last line the sequential stream of misses queued for read-ahead (0: none).
  std::uint64_t ra_end_ = 0;

  std::mutex hint_m_;
  std::uint64_t hint_cursor_ = 0;  // the next ring position to read

  mutable std::mutex error_m_;
  std::string last_error_;

  std::atomic<bool> stop_{false};
  std::mutex stop_m_;
  std::condition_variable stop_cv_;
  std::vector<std::thread> threads_;
  std::vector<resident_worker> resident_workers_;  // grown by on_workers, from the calling thread
};

}  // namespace gpm::detail::ooc
