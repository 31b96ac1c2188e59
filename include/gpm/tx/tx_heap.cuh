// gpm::tx_heap: persistent GPU transactions with helper warps (Helper Warps, TPDS'20). A heap of
// 32-bit words lives in a named gpm::pool object (its persistent home image and one redo log per
// block); kernels read and write a working copy in GPU memory through transactions
// (gpm::tx_ref::run, tx_ref.cuh), and every commit's redo record reaches its log either from the
// committing thread or, with helper warps, from a ring in the block's shared memory that helper
// warps drain. A host thread owned by the heap applies persisted records to the home image in
// commit order, advances the `applied` root and frees log space while kernels run. After a crash,
// open() replays the records that form a complete prefix of the commit order and rebuilds the
// working copy. Modes (tx_mode): volatile, direct, HCL-striped direct, GPM-style undo logging
// in place, helpers, and adaptive,
// which switches helper warps on and off by the measured persist bandwidth against a threshold
// that gpm::tx_calibrate measures on the machine. Protocol, format and recovery rule:
// docs/transactions.md.
//
//   gpm::tx_heap heap = gpm::tx_heap::create(pool, "bank", {.words = n, .logs = 128});
//   heap.store(0, initial.data(), n);                       // initial contents, durable
//   heap.launch(128, 256, [=] __device__(gpm::tx_ref tx) { ... tx.run(...) ... }, stream);
//   heap.sync(stream);                                      // everything committed is durable
//   ... after a crash:
//   gpm::tx_heap again = gpm::tx_heap::open(pool, "bank");   // recovers
//
// Durability: a commit is durable once every commit before it in the global order is persisted
// too (durable_seq()). Durable means the pool's durability: process-crash durable for pools in
// tmpfs, power-fail durable on device-DAX with a persistent cache domain, snapshot durable at
// pool.snapshot() (take it after sync()). Kernels that use one heap run one at a time, and the
// heap must be destroyed after its kernels finish and before its pool is closed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/platform/kernel.cuh>
#include <gpm/tx/detail/launch.cuh>
#include <gpm/tx/tx_ref.cuh>
#include <gpm/tx/tx_status.cuh>

namespace gpm {

class pool;

// The heap's geometry, fixed at creation and stored in its header.
struct tx_geometry {
  std::uint64_t words = 0;             // 32-bit words (1 .. 2^32)
  std::uint32_t logs = 0;              // redo logs: at least the blocks of a helpers launch
  std::uint64_t log_bytes = 64 << 10;  // bytes of each log: a multiple of 16, at least 256
  friend bool operator==(const tx_geometry&, const tx_geometry&) = default;
};

// Process-local choices, not stored in the pool.
// How transactions read (tx_options::reads).
enum class tx_reads : std::uint32_t {
  // The paper's: a read takes the word's ownership record at encounter, as a write does, so
  // readers of one word conflict with each other.
  locked,
  // Versioned invisible reads (PR-STM style): a read notes the orec's version and takes nothing;
  // a commit that writes raises the versions of the orecs it wrote. A transaction checks its
  // reads when it commits (one that writes takes the orecs it read then, for the check and its
  // sequence number). Readers of one word never conflict. One 32-bit version per orec in GPU
  // memory.
  versioned,
};

struct tx_options {
  tx_mode mode = tx_mode::helpers;
  tx_reads reads = tx_reads::locked;
  std::uint32_t helper_warps = 1;    // helpers, adaptive: helper warps per block, 1 or 2
  std::uint32_t ring_chunks = 1024;  // helpers, adaptive: 16-byte chunks (two pairs) per ring
  // adaptive: the persist bandwidth (bytes/s) above which helper warps turn on; unset: measured
  // by gpm::tx_calibrate(pool) when the heap is opened (once per process)
  std::optional<double> switch_threshold;
  std::uint32_t slice_us = 100;  // adaptive: the bandwidth monitor's time slice, microseconds
  // adaptive: learn each kernel's faster kind from measured commit rates (tx_heap::launch);
  // false: the paper's switch alone, each launch's ring chosen by the last launch's bandwidth
  bool learn = true;
  // tx_heap::launch: at most this many blocks of a launch on one SM at once (0: as many as fit),
  // by asking for more shared memory than the ring needs. Fewer resident blocks run fewer
  // transactions at once, so they conflict less (docs/workloads/tx.md, "Registers decide how
  // many blocks run"); 1 to 32.
  std::uint32_t max_blocks_per_sm = 0;
  // adaptive: learn each kernel's number of blocks an SM from measured commit rates, as the ring
  // is learnt: a launch as it fits, then one block an SM fewer while each step committed faster,
  // the fastest kept and its neighbours measured again every 16 launches (src/tx/residency.hpp).
  // Not with max_blocks_per_sm, which fixes the cap instead.
  bool learn_residency = false;
  std::uint32_t max_attempts = 0;       // attempts before run() gives up (0: until it commits)
  std::uint64_t max_threads = 1 << 20;  // threads that may run transactions in one kernel
  std::uint64_t orecs = 0;  // ownership records, a power of two; 0: words, rounded up, <= 2^22
  // Redo modes: a host thread of the heap applies persisted records while kernels run. false: no
  // such thread; only sync(), durable_seq() and store() apply records, so a launch's records must
  // fit in its logs' free space (a commit that finds its log full would wait forever). For tests
  // that need the host quiet while kernels run (the crash-image checker's: a persist by another
  // thread while it explores a crash point is not seen by its model; tx_crash_image_test.cu).
  bool background_apply = true;
  // Redo records: sync() and recovery apply what is pending with kernels (src/tx/replay.cu: every
  // record at once, each word's newest value of the prefix written), which takes GPU memory at
  // the first use: a 32-bit claim per heap word, up to 24 MiB for a window of records and, where
  // it fits, a copy of the logs, at most a quarter of the GPU memory free then (without room
  // for the first two, the host applies). A sync()
  // while a tx_heap::launch kernel still runs applies on the host; kernels launched with ref()
  // must be finished before a sync() in another stream. false: the host thread applies them one
  // after another, as it does while kernels run.
  bool gpu_replay = true;
  // The most sequence numbers one run of the replay kernels covers (fewer where the logs cannot
  // hold as many records); its slots take 24 bytes each in GPU memory. At least 1.
  std::uint64_t replay_window = 1 << 20;
};

// What open() found and did (last_recovery()).
struct tx_recovery {
  double seconds = 0;
  std::uint64_t applied_seq = 0;  // every commit up to it is in the home image
  std::uint64_t replayed = 0;     // records replayed from the logs
  std::uint64_t discarded = 0;    // valid records after the first gap: not replayed, dropped
  std::uint64_t rolled_back = 0;  // undo mode: undo records of unfinished commits rolled back
};

struct tx_stats {
  std::uint64_t commits = 0;          // transactions committed since open
  std::uint64_t aborts = 0;           // attempts aborted by conflicts since open
  std::uint64_t persisted_bytes = 0;  // redo records persisted into the logs since open
  std::uint64_t durable_seq = 0;      // as durable_seq(), without a new pass over the logs
  std::uint64_t ring_commits = 0;     // commits whose record helper warps persisted
  std::uint64_t launches = 0;         // tx_heap::launch calls since open
  std::uint64_t ring_launches = 0;    // of them, with the ring and helper warps
  // The last tx_heap::launch's kernel: registers a thread (0 on the host emulator) and blocks of
  // its shape resident at once on one multiprocessor (with how many transactions run at once,
  // this sets how often they conflict: docs/workloads/tx.md, "Registers decide ...")
  std::uint32_t launch_registers = 0;
  std::uint32_t launch_blocks_per_sm = 0;
  // adaptive: time slices the bandwidth monitor decided ON (helpers) and OFF (direct), and how
  // often its decision changed, over the launches with a ring; the threshold in use (bytes/s)
  std::uint64_t slices_on = 0;
  std::uint64_t slices_off = 0;
  std::uint64_t switches = 0;
  double switch_threshold = 0;
  // adaptive: commits per second of the last measured launch with the ring (helpers held on or
  // switched by the monitor) and without it, of any kernel; 0: none measured yet
  double ring_commit_rate = 0;
  double direct_commit_rate = 0;
  // Redo records applied to the home image since open: by the replay kernels (sync() and
  // recovery with tx_options::gpu_replay) in how many runs, and by the host's reproducer
  std::uint64_t replayed_on_gpu = 0;
  std::uint64_t replay_runs = 0;
  std::uint64_t applied_on_host = 0;
  // helpers, adaptive: how full the rings were while helper warps ran, since open (the paper's
  // Fig. 15): bin i holds the time, in ns summed over blocks, during which a block's ring held
  // between i / 64 and (i + 1) / 64 of its chunks (taken by committers and not yet persisted;
  // the last bin also counts a full ring that committers wait for). tx_ring_occupancy() reads
  // percentiles from it.
  std::array<std::uint64_t, detail::tx::kOccupancyBins> ring_occupancy_ns{};
};

// The ring occupancy at or below which the rings stood for `fraction` (0..1] of the time that
// `bins` (tx_stats::ring_occupancy_ns, or the difference of two) covers, as a fraction of the
// ring: the upper edge of the bin that reaches it (1/64 steps). 0 when the bins hold no time.
double tx_ring_occupancy(const std::array<std::uint64_t, detail::tx::kOccupancyBins>& bins,
                         double fraction);

// The Helper Warps paper's Fig. 6 micro-benchmark (TPDS'20 §5.2), which finds the switching
// threshold: every thread runs `reps` transactions that each write `writes` words of its own
// (no conflicts, the logs' write pattern), in direct and in helpers mode, for thread counts
// doubling from min_threads to max_threads (write pressure). Each point times `repeats` launches
// of each mode, alternating the modes, and keeps each mode's median. The threshold is
// tx_calibration_threshold(points).
struct tx_calibration {
  std::uint32_t writes = 4;
  std::uint32_t reps = 8;
  std::uint64_t min_threads = 256;
  std::uint64_t max_threads = 1 << 17;
  std::uint32_t workers_per_block = 256;  // blocks: threads / workers_per_block, at least 1
  std::uint32_t repeats = 3;              // timed launches per point and mode (median kept)
};
struct tx_calibration_point {
  std::uint64_t threads = 0;
  double direct_seconds = 0, helpers_seconds = 0;      // kernel time of each mode (median)
  double direct_bandwidth = 0, helpers_bandwidth = 0;  // bytes persisted per second (same launch)
};
// The switching threshold of a sweep (points in rising thread counts): the persist bandwidth
// direct mode reached at the first point where helpers finished sooner and still did at the next
// point (or that point is the last), so one noisy point neither starts nor ends the crossover;
// infinity when there is no such point (helpers never turn on).
double tx_calibration_threshold(const std::vector<tx_calibration_point>& points);
struct tx_calibration_result {
  double threshold = 0;  // bytes/s; infinity when helpers never won
  std::vector<tx_calibration_point> points;
};
// Runs the sweep on a scratch heap in `p` (the pool object "gpm.tx.calibrate", freed after).
// Throws invalid_argument (bad sweep), out_of_memory (the pool has no room for the scratch heap).
tx_calibration_result tx_calibrate_sweep(pool& p, const tx_calibration& c = {});
// The threshold of the first sweep this process ran (running it now if none did).
double tx_calibrate(pool& p, const tx_calibration& c = {});

class tx_heap {
 public:
  // Creates the heap as the pool object `name`, all words zero, in `p`, which must outlive the
  // heap (and its refs). Throws gpm::error:
  // invalid_argument (geometry), already_exists, out_of_memory (the pool is too small).
  static tx_heap create(pool& p, std::string_view name, const tx_geometry& geometry,
                        const tx_options& options = {});
  // Opens the heap, validating its header (magic, version, checksum, geometry) and root, and
  // recovers it (see the top of this file). Throws not_found, corrupt, version, invalid_argument
  // (options). The overload with a geometry also throws layout_mismatch when the stored geometry
  // differs from `expected`.
  static tx_heap open(pool& p, std::string_view name, const tx_options& options = {});
  static tx_heap open(pool& p, std::string_view name, const tx_geometry& expected,
                      const tx_options& options = {});

  // A heap moved from is empty: every member but assignment and the destructor throws
  // invalid_argument.
  tx_heap(tx_heap&&) noexcept;
  tx_heap& operator=(tx_heap&&) noexcept;
  ~tx_heap();

  // For kernels the caller launches (any 1-D grid): transactions commit directly, or log
  // nothing in volatile mode; no helper warps.
  tx_ref ref() const;

  // Launches `blocks` blocks of `workers_per_block` worker threads (a multiple of 32), each
  // calling body(tx_ref) with a tx_ref bound to its block. In helpers mode every block gets the
  // helper warps and ring of the options and uses log blockIdx.x (so blocks <= logs). In adaptive
  // mode each body type (kernel) is learnt: its first launch gets them with helpers held on, its
  // second runs without them, and later launches take whichever committed faster, measuring the
  // other again once it has not run for 16 launches, then 32, 64, ... 1024 while it keeps losing
  // (with tx_options::learn false: a launch after one whose persist bandwidth exceeded the
  // threshold, and the first, get them).
  // docs/transactions.md. `body` is a trivially copyable functor or extended __device__ lambda.
  // Asynchronous, in `stream`.
  template <class Body>
  void launch(std::uint32_t blocks, std::uint32_t workers_per_block, Body body,
              cudaStream_t stream = nullptr) {
    const auto kernel = &detail::tx::launch_kernel<Body>;
    const detail::tx::launch_plan plan =
        plan_launch(blocks, workers_per_block, stream, reinterpret_cast<const void*>(kernel));
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(plan.shared_bytes)),
               "cudaFuncSetAttribute (the persistence ring's shared memory)");
    gpm::launch(kernel, plan.blocks, plan.threads_per_block, plan.shared_bytes, stream, plan.view,
                body);
    launched(stream, reinterpret_cast<const void*>(kernel), plan);
  }

  // Waits for `stream`, then until every commit made so far is durable and applied.
  void sync(cudaStream_t stream = nullptr);
  // The durable watermark: every commit with a sequence number up to it is durable. Applies
  // what it finds to the home image first (with the replay kernels when no tx_heap::launch
  // kernel runs, else a pass of the host's reproducer). 0 in volatile mode. In undo mode every commit is
  // durable when run() returns; the watermark is the last commit sync() saw.
  std::uint64_t durable_seq();

  // Sets `count` words from `first` in the home image (persisted) and the working copy: a
  // heap's initial contents. Not a transaction: call it when no kernel uses the heap; a crash
  // during store() leaves any subset of the words stored. Throws invalid_argument (range).
  void store(std::uint64_t first, const std::uint32_t* values, std::uint64_t count);
  // Copies `count` words from `first` of the working copy to `out` (synchronous).
  void load(std::uint64_t first, std::uint32_t* out, std::uint64_t count) const;

  const tx_recovery& last_recovery() const;
  tx_stats stats() const;
  const tx_geometry& geometry() const;
  const tx_options& options() const;
  const std::string& name() const;

  struct impl;

 private:
  explicit tx_heap(std::unique_ptr<impl> impl);
  impl& self() const;  // throws invalid_argument once moved from
  // `kernel` names what the launch runs (adaptive mode learns per kernel).
  detail::tx::launch_plan plan_launch(std::uint32_t blocks, std::uint32_t workers,
                                      cudaStream_t stream, const void* kernel);
  // After the kernel is queued: adaptive bookkeeping, and what the kernel takes (tx_stats).
  void launched(cudaStream_t stream, const void* kernel, const detail::tx::launch_plan& plan);
  std::unique_ptr<impl> impl_;
};

}  // namespace gpm
