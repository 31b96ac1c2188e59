// gpm::tx_heap host side: creating and opening the heap object, recovery, the GPU state (working
// copy, ownership records, status slots, sequence counter, bandwidth monitor), launch plans with
// the adaptive per-launch choice of the ring, the reproducer thread that applies persisted
// records while kernels run, and the replay kernels' runs (replay.cu) in sync() and recovery.
//
// The module's persist sites (gpm::persist_at; docs/crash-checking.md), caught when removed by
// tests/tx/tx_crash_image_test.cu. Kernels (include/gpm/tx/detail/engine.cuh; on a GPU each is
// the one fence it was, in host code each range a thread stored is named):
//   tx.commit.record   a direct or hcl commit's redo record, before run() returns
//   tx.drain.chunks    the ring chunks a helper lane copied into the block's log, before they count
//                      as persisted (and their ring slots are freed)
//   tx.undo.log        an undo commit's record of old values, before the home image is written
//   tx.undo.home       an undo commit's new values in the home image, before the record retires
//   tx.undo.retire     the retired undo record (slot 0 cleared), before the orecs are released
//   tx.apply.home and tx.recover.home (below) also name the replay kernels' home-image stores
// Host (this file, media.cpp, reproducer.cpp):
//   tx.create.header   a new heap's header, after its first root: until durable, open() refuses it
//   tx.create.root     a new heap's first `applied` root record
//   tx.store.home      the words store() sets
//   tx.apply.home      the home words a reproducer pass wrote, before the root flips
//   tx.apply.root      the flip: the `applied` root moved to the pass's last record
//   tx.apply.head      the log heads a pass moved (log space freed), after the flip
//   tx.sync.root       undo mode: the `applied` root moved to the last commit sync() saw
//   tx.recover.home    the home words recovery replayed, before the new epoch's root
//   tx.recover.undo    the home words recovery rolled back (an undo epoch), before that root
//   tx.recover.root    the new epoch's root, which invalidates every older record
//   tx.recover.head    each log's head reset to 0 for the new epoch
// The helpers' tail publish (the block's persisted count, the ring slots freed) is in GPU and
// shared memory and persists nothing.
#include <gpm/tx/tx_heap.cuh>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <gpm/platform/persist.hpp>
#include <gpm/platform/pinned_buffer.hpp>
#include <gpm/pool/pool.hpp>

#include "kind_learner.hpp"
#include "media.hpp"
#include "replay.hpp"
#include "residency.hpp"

namespace gpm {

namespace T = detail::tx;

namespace {

// What a block's dynamic shared memory may hold on the GPUs gpmkit targets (H100, H200).
constexpr std::uint64_t kMaxSharedBytes = 227 << 10;
constexpr std::uint64_t kDefaultMaxOrecs = 1ull << 22;
constexpr std::uint32_t kMaxBlockThreads = 1024;

// Before adaptive launch n, one thread: the start of its marks (T::launch_marks), the monitor
// reset, ON when `start_on`. A small kernel in the stream instead of memsets, copies and events:
// on short launches (Hashtable H1's 0.5 ms) that bookkeeping was a measurable share of the
// adaptive mode's time. The launch's last block writes the rest (T::finish_launch).
__global__ void start_launch(T::heap_view v, T::launch_marks* marks, bool start_on) {
  marks->start_seq = *v.seq;
  marks->start_ns = global_time_ns();
  std::memset(static_cast<void*>(v.monitor), 0, T::kMonitorResetBytes);
  v.monitor->on = start_on ? 1 : 0;
}

std::string label_of(const pool& p, std::string_view name) {
  return "transactional heap '" + std::string(name) + "' in pool " + p.path();
}

// Modes whose launches may get the ring and helper warps.
bool has_helpers(tx_mode m) { return m == tx_mode::helpers || m == tx_mode::adaptive; }

void check_options(const tx_options& o) {
  require(o.mode <= tx_mode::undo, "tx_options: mode " +
                                       std::to_string(static_cast<std::uint32_t>(o.mode)) +
                                       " is not a tx_mode");
  require(o.reads <= tx_reads::versioned, "tx_options: reads " +
                                              std::to_string(static_cast<std::uint32_t>(o.reads)) +
                                              " is not a tx_reads");
  require(!has_helpers(o.mode) || (o.helper_warps >= 1 && o.helper_warps <= 2),
          "tx_options: helper_warps must be 1 or 2 in helpers and adaptive modes, got " +
              std::to_string(o.helper_warps) + " (tx_mode::direct runs without helpers)");
  require(!o.switch_threshold || *o.switch_threshold >= 0,
          "tx_options: switch_threshold must be a bandwidth in bytes/s, 0 or more (leave it unset "
          "to calibrate)");
  require(o.slice_us >= 1, "tx_options: slice_us must be at least 1 microsecond");
  require(o.max_blocks_per_sm <= 32,
          "tx_options: max_blocks_per_sm must be 0 (no cap) to 32, got " +
              std::to_string(o.max_blocks_per_sm));
  require(!o.learn_residency || (o.mode == tx_mode::adaptive && o.max_blocks_per_sm == 0),
          "tx_options: learn_residency learns from adaptive mode's measured launches and chooses "
          "the cap itself: set mode = tx_mode::adaptive and leave max_blocks_per_sm 0");
  require(o.replay_window >= 1, "tx_options: replay_window must be at least 1 sequence number");
  require(
      !has_helpers(o.mode) ||
          (o.ring_chunks >= 2 && T::ring_bytes(o.ring_chunks, kMaxBlockThreads) <= kMaxSharedBytes),
      "tx_options: ring_chunks must be between 2 and " +
          std::to_string((kMaxSharedBytes - T::ring_bytes(0, kMaxBlockThreads)) /
                         (T::kChunkBytes + 8)) +
          " (the ring lives in a block's shared memory), got " + std::to_string(o.ring_chunks));
  require(
      o.max_threads >= 1 && o.max_threads <= (1ull << 31),
      "tx_options: max_threads must be between 1 and 2^31, got " + std::to_string(o.max_threads));
  require(
      o.orecs == 0 || (o.orecs <= (1ull << 30) && (o.orecs & (o.orecs - 1)) == 0),
      "tx_options: orecs must be 0 or a power of two up to 2^30, got " + std::to_string(o.orecs));
}

// Undo mode: the chunks of each thread slot's undo slot (the 32 lanes of a warp interleaved, the
// warps spread over the logs). Throws invalid_argument when they cannot hold a one-word record.
std::uint64_t undo_slot_chunks(const T::heap_layout& layout, const tx_options& o,
                               std::string_view name) {
  if (o.mode != tx_mode::undo) return 0;
  const std::uint64_t warps_per_log = ((o.max_threads + 31) / 32 + layout.logs - 1) / layout.logs;
  const std::uint64_t depth = layout.log_chunks / (32 * warps_per_log);
  require(depth >= T::record_chunks(1),
          "tx_options: undo mode gives each of max_threads = " + std::to_string(o.max_threads) +
              " threads an undo slot in the logs, and heap '" + std::string(name) + "' has " +
              std::to_string(layout.logs) + " logs of " + std::to_string(layout.log_bytes()) +
              " bytes, which leave " + std::to_string(depth * T::kChunkBytes) +
              " bytes each (32 at least): lower max_threads or create larger logs");
  return depth;
}

// The device's most dynamic shared memory a block of `kernel` may ask for (its static shared
// memory counts too), which the kernel is then allowed: the occupancy API counts no block that
// asks for more than the kernel's attribute allows.
int allow_most_shared(const void* kernel) {
  int dev = 0, most = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
             "cudaDeviceGetAttribute (shared memory per block)");
  cudaFuncAttributes a{};
  check_cuda(cudaFuncGetAttributes(&a, kernel), "cudaFuncGetAttributes (tx residency)");
  most -= static_cast<int>(a.sharedSizeBytes);
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most),
             "cudaFuncSetAttribute (tx residency)");
  return most;
}

// The blocks of `threads` threads asking for `bytes` of dynamic shared memory that fit an SM at
// once (at least 1).
std::uint32_t blocks_fitting(const void* kernel, std::uint32_t threads, std::size_t bytes) {
  allow_most_shared(kernel);
  return std::max(1u, detail::blocks_per_multiprocessor(kernel, threads, bytes));
}

// The dynamic shared memory a launch of `threads` threads a block asks for so that at most `cap`
// of its blocks share an SM: `bytes` where no more fit already, else the least that brings the
// occupancy down to `cap` (by bisection with the occupancy API, the kernel allowed the device's
// most shared memory a block meanwhile; tx_heap::launch then sets the attribute to what it asks).
std::size_t capped_shared_bytes(const void* kernel, std::uint32_t threads, std::size_t bytes,
                                std::uint32_t cap) {
  const auto occupancy = [&](std::size_t shared) {
    return detail::blocks_per_multiprocessor(kernel, threads, shared);
  };
  const int most = allow_most_shared(kernel);
  if (occupancy(bytes) <= cap) return bytes;
  std::size_t lo = bytes, hi = static_cast<std::size_t>(most);  // occupancy(lo) > cap
  require(occupancy(hi) <= cap,
          "tx_options: max_blocks_per_sm = " + std::to_string(cap) + " cannot be reached for " +
              std::to_string(threads) + " threads a block: " + std::to_string(occupancy(hi)) +
              " blocks fit an SM even with the most shared memory a block may ask for");
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (occupancy(mid) <= cap ? hi : lo) = mid;
  }
  return hi;
}

std::uint64_t orec_count(const tx_options& o, std::uint64_t words) {
  if (o.orecs != 0) return o.orecs;
  std::uint64_t n = 1;
  while (n < words && n < kDefaultMaxOrecs) n *= 2;
  return n;
}

template <class U>
device_buffer<U> zeroed(std::size_t count) {
  device_buffer<U> b(count);
  b.fill_bytes(0);
  return b;
}

tx_geometry geometry_of(const T::heap_header& h) {
  return {h.words, h.logs, h.log_chunks * T::kChunkBytes};
}

// The validated header of the heap `name`: not_found, corrupt, version.
T::heap_header find_heap(pool& p, std::string_view name) {
  const std::string what = label_of(p, name);
  const pool_object obj = p.open_object(name, T::kHeapKind, what);
  return T::check_geometry(p.host_ptr<char>(obj.offset), obj.bytes, what);
}

}  // namespace

std::string_view to_string(tx_status s) noexcept {
  switch (s) {
    case tx_status::committed: return "committed";
    case tx_status::cancelled: return "cancelled";
    case tx_status::too_many_aborts: return "too_many_aborts";
    case tx_status::read_set_full: return "read_set_full";
    case tx_status::write_set_full: return "write_set_full";
    case tx_status::out_of_range: return "out_of_range";
    case tx_status::record_too_large: return "record_too_large";
    case tx_status::too_many_threads: return "too_many_threads";
  }
  return "unknown";
}

namespace {
constexpr tx_mode kModes[] = {tx_mode::volatile_only, tx_mode::direct, tx_mode::helpers,
                              tx_mode::adaptive,      tx_mode::hcl,    tx_mode::undo};
}

std::string_view to_string(tx_mode m) noexcept {
  switch (m) {
    case tx_mode::volatile_only: return "volatile";
    case tx_mode::direct: return "redo-direct";
    case tx_mode::helpers: return "helpers";
    case tx_mode::adaptive: return "adaptive";
    case tx_mode::hcl: return "redo-hcl";
    case tx_mode::undo: return "undo-hcl";
  }
  return "unknown";
}

std::optional<tx_mode> parse_tx_mode(std::string_view name) noexcept {
  for (const tx_mode m : kModes) {
    if (to_string(m) == name) return m;
  }
  return std::nullopt;
}

struct tx_heap::impl {
  impl(pool& p, std::string_view n, const T::heap_header& h, const tx_options& o)
      : claim(p.claim(n, "a tx_heap")),
        owner(&p),
        name(n),
        geometry(geometry_of(h)),
        options(o),
        rep(T::heap_media(p.host_ptr<char>(p.get(n).offset), h, label_of(p, n))),
        work(h.words),
        orecs(zeroed<std::uint64_t>(orec_count(o, h.words))),
        versions(zeroed<std::uint32_t>(o.reads == tx_reads::versioned ? orecs.size() : 0)),
        status(zeroed<std::uint64_t>(o.max_threads)),
        counters(zeroed<std::uint64_t>(T::kCounters * o.max_threads)),
        seq(1),
        logs_state(zeroed<T::log_state>(h.logs)),
        monitor(zeroed<T::bandwidth_monitor>(1)),
        occupancy(zeroed<std::uint64_t>(T::kOccupancyBins)),
        marks(o.mode == tx_mode::adaptive ? 2 : 0, true) {
    for (std::size_t i = 0; i < marks.size(); ++i) marks.data()[i].done = 0;
  }

  ~impl() {
    {
      const std::lock_guard lock(mutex);
      stop = true;
    }
    wake.notify_all();
    if (thread.joinable()) thread.join();
  }

  // Recovers the heap and builds the GPU state from the home image.
  void recover() {
    const auto start = std::chrono::steady_clock::now();
    const bool undo = options.mode == tx_mode::undo;
    const T::heap_layout& layout = rep.media().layout();
    const std::uint64_t undo_depth = undo_slot_chunks(layout, options, name);
    const std::uint64_t base = owner->get(name).offset;
    const pool_ref gpu = owner->ref();
    if (options.gpu_replay) {
      replay.emplace(layout, options.replay_window, rep.media().salt(),
                     gpu.ptr<std::uint64_t>(base + layout.log_offset()),
                     gpu.ptr<std::uint32_t>(base + layout.home_offset()));
    }
    std::uint64_t replayed = 0;
    if (replay && !rep.undo_epoch()) {
      rep.start_at_heads();
      replayed = replay_pending(nullptr, "tx.recover.home");
    }
    const T::reproducer::recovered r = rep.recover(undo);
    recovery.replayed = replayed + r.replayed;
    recovery.discarded = r.discarded;
    recovery.rolled_back = r.rolled_back;
    recovery.applied_seq = rep.applied();
    work.copy_from_host(rep.media().home(), geometry.words);
    seq.copy_from_host(&recovery.applied_seq, 1);
    view.work = work.data();
    view.orecs = orecs.data();
    view.orec_mask = orecs.size() - 1;
    view.versions = versions.size() != 0 ? versions.data() : nullptr;
    view.status = status.data();
    view.counters = counters.data();
    view.max_threads = options.max_threads;
    view.words = geometry.words;
    view.seq = seq.data();
    view.logs_state = logs_state.data();
    view.occupancy = occupancy.data();
    view.control = gpu.ptr<T::log_control>(base + layout.control_offset());
    view.log_data = gpu.ptr<ulonglong2>(base + layout.log_offset());
    view.log_chunks = layout.log_chunks;
    view.logs = layout.logs;
    view.mode = options.mode;
    view.salt = rep.media().salt();
    view.epoch = rep.epoch();
    view.max_attempts = options.max_attempts;
    if (undo) {
      view.home = gpu.ptr<std::uint32_t>(base + layout.home_offset());
      view.undo_depth = undo_depth;
    }
    if (options.mode == tx_mode::adaptive) {
      threshold = options.switch_threshold ? *options.switch_threshold : tx_calibrate(*owner);
      view.monitor = monitor.data();
      view.slice_ns = std::uint64_t{options.slice_us} * 1000;
      view.slice_threshold = slice_bytes(threshold);
    }
    recovery.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Undo commits write the home image themselves: nothing to apply.
    if (options.mode != tx_mode::volatile_only && !undo && options.background_apply) {
      thread = std::thread([this] { reproduce(); });
    }
  }

  // The reproducer thread: passes over the logs, often while they fill, rarely when idle.
  void reproduce() {
    using std::chrono::microseconds;
    microseconds wait{50};
    std::unique_lock lock(mutex);
    while (!stop) {
      try {
        // After a full batch more records are likely waiting: the next pass starts at once,
        // unless a sync() waits for the mutex to run the replay kernels, which apply what is
        // left faster: then the pass in progress ends at its next unit, and no other starts
        // (std::mutex is not fair: this loop would take it back before the waiter, pass after
        // pass).
        const std::uint64_t applied =
            syncing.load(std::memory_order_relaxed) == 0 ? rep.pass(&syncing) : 0;
        applied_on_host += applied;
        wait = applied >= T::reproducer::kBatch ? microseconds{0}
               : applied != 0 || kicked         ? microseconds{50}
                                                : std::min(wait * 2, microseconds{1000});
      } catch (...) {
        failure = std::current_exception();
        return;
      }
      kicked.store(false, std::memory_order_relaxed);
      wake.wait_for(lock, wait, [&] { return stop || kicked.load(std::memory_order_relaxed); });
    }
  }

  // Bytes persisted into the logs since open, from the logs' device counters (or a copy).
  static std::uint64_t persisted_bytes(const T::log_state* logs, std::uint32_t count) {
    std::uint64_t chunks = 0;
    for (std::uint32_t log = 0; log < count; ++log) chunks += logs[log].persisted;
    return chunks * T::kChunkBytes;
  }
  std::uint64_t persisted_bytes() const {
    std::vector<T::log_state> copy(geometry.logs);
    logs_state.copy_to_host(copy.data(), copy.size());
    return persisted_bytes(copy.data(), geometry.logs);
  }
  // The bytes one monitor slice persists at `bytes_per_s`; a bandwidth no slice can reach
  // (infinite: helpers never won) never turns helpers on.
  std::uint64_t slice_bytes(double bytes_per_s) const {
    const double per_slice = bytes_per_s * static_cast<double>(view.slice_ns) * 1e-9;
    return per_slice < 0x1p63 ? static_cast<std::uint64_t>(per_slice)
                              : std::numeric_limits<std::uint64_t>::max();
  }

  // Adaptive mode: what was learnt of one kernel (a body type) from its measured launches.
  struct kernel_rates {
    // commits/s of its last launch of each kind (with learn_residency: the best of the kind's
    // residencies measured)
    T::kind_learner kinds;
    double ring_bandwidth = 0;  // bytes/s persisted in its last ring launch
  };

  // Adaptive mode: records the last launch's commit rate and bandwidth once it has finished (a
  // launch still running when the next is planned is not measured).
  void finish_measurement() {
    if (!measuring) return;
    const T::launch_marks& m = marks.data()[measured_launch % 2];
    if (std::atomic_ref<const std::uint64_t>(m.done).load(std::memory_order_acquire) !=
        measured_launch) {
      return;
    }
    measuring = false;
    const double seconds = static_cast<double>(m.stop_ns - m.start_ns) * 1e-9;
    if (seconds <= 0) return;
    const auto bytes = static_cast<double>(m.chunks * T::kChunkBytes);
    const double rate = static_cast<double>(m.stop_seq - m.start_seq) / seconds;
    hot = bytes > threshold * seconds;
    ring_next = hot;
    // With learn_residency each kind is compared at its best residency, not at a probe's.
    double kind_rate = rate;
    if (measured_learner != nullptr) {
      measured_learner->record(measured_blocks, rate);
      kind_rate = measured_learner->best_rate();
    }
    kernel_rates& k = kernels[measured_kernel];
    k.kinds.record(measured_ring, kind_rate);
    if (measured_ring) {
      k.ring_bandwidth = bytes / seconds;
      ring_commit_rate = rate;
    } else {
      direct_commit_rate = rate;
    }
  }

  // What choose() decided for a launch.
  struct launch_choice {
    bool ring = false;                  // the kernel with the ring and helper warps
    bool start_on = false;              // helpers ON from the launch's start
    std::uint64_t slice_threshold = 0;  // the monitor's threshold, bytes per slice
  };

  // Adaptive mode: whether this launch of `kernel` gets the ring, and how its monitor starts
  // and decides. Without learning (the paper's switch alone): the first launch gets the ring,
  // starting OFF so the monitor can turn helpers on, later ones after a launch that persisted
  // faster than the threshold, starting ON (a launch still running when the next is planned
  // leaves the choice as it was). With learning (the default; an unmeasured launch is measured
  // again): the kernel's kind_learner chooses, and a ring launch starts with helpers ON; its
  // monitor still turns them off, as the paper's switch does, when a slice persists under the
  // lower of the calibrated threshold and half the bandwidth this kernel's ring launch reached
  // (held on, threshold 0, while no ring launch was measured).
  launch_choice choose(const void* kernel) {
    finish_measurement();
    kernel_rates& k = kernels[kernel];
    launch_choice c;
    if (!options.learn) {
      c.ring = ring_next;
      c.start_on = c.ring && hot;
      c.slice_threshold = slice_bytes(threshold);
    } else {
      c.ring = c.start_on = k.kinds.choose();
      if (k.kinds.rate(true) >= 0) {
        c.slice_threshold = slice_bytes(std::min(threshold, k.ring_bandwidth / 2));
      }
    }
    measured_kernel = kernel;
    measured_ring = c.ring;
    return c;
  }

  // One pass by the caller (under the lock the thread also takes); returns the applied seq.
  std::uint64_t pass() {
    const std::lock_guard lock(mutex);
    if (failure) std::rethrow_exception(failure);
    if (options.mode != tx_mode::undo) applied_on_host += rep.pass();  // undo logs hold none
    return rep.applied();
  }

  // What sync() and durable_seq() do: applies every record that extends the prefix, with the
  // replay kernels where the heap has them, else a pass. What the kernels leave ready (a window
  // they leave to the host's merge, records past the logs' device tails) gets a pass too: the
  // reproducer thread passes only while no sync() or durable_seq() waits for the mutex, so a
  // caller polling durable_seq() would otherwise wait on it forever. Returns the applied seq.
  std::uint64_t apply_pending() {
    // A launch of this heap still running (in another stream than sync()'s) may hold every SM
    // with committers that wait for log space, which only the host's passes would free while
    // the replay kernels waited for an SM: then the host applies.
    if (!replay || !last_launch.done()) return pass();
    syncing.fetch_add(1, std::memory_order_relaxed);
    const std::unique_lock lock(mutex);
    syncing.fetch_sub(1, std::memory_order_relaxed);
    if (failure) std::rethrow_exception(failure);
    if (options.mode != tx_mode::undo) {
      replay_pending(logs_state.data(), "tx.apply.home");
      if (rep.any_ready()) applied_on_host += rep.pass();
    }
    return rep.applied();
  }

  // Runs the replay kernels while they extend the prefix (a window at a time); returns the
  // records they applied. The caller holds the mutex, or no other thread runs yet (recovery).
  // `tails`: the logs' device state, whose tails bound what the kernels read (null: unknown).
  std::uint64_t replay_pending(const T::log_state* tails, const char* site) {
    if (!rep.any_ready()) return 0;
    if (!replay->reserve()) {
      replay.reset();  // no room in GPU memory: the host applies from now on
      return 0;
    }
    std::uint64_t total = 0;
    do {
      const T::gpu_replay::result r =
          replay->run(rep.applied(), rep.epoch(), rep.positions(), tails, site);
      ++replay_runs;
      if (r.records == 0) break;
      rep.advance(rep.applied() + r.records, r.positions);
      total += r.records;
      replayed_on_gpu += r.records;
    } while (rep.any_ready());
    return total;
  }

  object_claim claim;  // first: released after the reproducer thread stopped
  pool* owner;
  std::string name;
  tx_geometry geometry;
  tx_options options;
  T::reproducer rep;
  std::optional<T::gpu_replay> replay;  // tx_options::gpu_replay
  event last_launch;                    // recorded after each tx_heap::launch
  // Records applied since open (tx_stats), under the mutex.
  std::uint64_t replayed_on_gpu = 0, replay_runs = 0, applied_on_host = 0;
  tx_recovery recovery;
  device_buffer<std::uint32_t> work;
  device_buffer<std::uint64_t> orecs;
  device_buffer<std::uint32_t> versions;  // tx_reads::versioned: one per orec
  device_buffer<std::uint64_t> status;
  device_buffer<std::uint64_t> counters;
  device_buffer<std::uint64_t> seq;
  device_buffer<T::log_state> logs_state;
  device_buffer<T::bandwidth_monitor> monitor;
  device_buffer<std::uint64_t> occupancy;  // T::kOccupancyBins bins of ring occupancy (ns)
  T::heap_view view;

  // tx_heap::launch bookkeeping; adaptive mode's threshold and last measured launch.
  std::uint64_t launches = 0;
  std::uint64_t ring_launches = 0;
  // The last launch's kernel and shape, and what it takes (tx_stats), asked of the runtime when
  // either changes.
  struct residency {
    const void* kernel = nullptr;
    std::uint32_t threads = 0;
    std::size_t shared_bytes = 0;
    std::uint32_t registers = 0;
    std::uint32_t blocks_per_sm = 0;
  } resident;
  // A kernel, threads a block and the dynamic shared memory it needs.
  using shape_key = std::tuple<const void*, std::uint32_t, std::size_t>;
  // The shared memory each shape asks for to hold at most a number of blocks an SM
  // (max_blocks_per_sm, learn_residency): found once per shape and cap.
  std::map<std::pair<shape_key, std::uint32_t>, std::size_t> capped;
  // learn_residency: per shape, the blocks that fit an SM without a cap and what was learnt.
  struct residency_choice {
    std::uint32_t most = 0;
    T::residency_learner learner;
  };
  std::map<shape_key, residency_choice> residencies;
  T::residency_learner* measured_learner = nullptr;  // the measured launch's, and its blocks
  std::uint32_t measured_blocks = 0;

  // The dynamic shared memory a launch of `shape` asks for to hold at most `cap` blocks an SM.
  std::size_t capped_bytes(const shape_key& shape, std::uint32_t cap) {
    auto [at, added] = capped.try_emplace({shape, cap}, 0);
    if (added) {
      at->second =
          capped_shared_bytes(std::get<0>(shape), std::get<1>(shape), std::get<2>(shape), cap);
    }
    return at->second;
  }
  double threshold = 0;
  std::unordered_map<const void*, kernel_rates> kernels;
  const void* measured_kernel = nullptr;  // the launch being measured: its kernel and kind
  bool measured_ring = false;
  bool hot = false;        // the last measured launch persisted faster than the threshold
  bool ring_next = true;   // without learning: the next launch gets the ring
  bool measuring = false;  // launch measured_launch was queued, its marks not yet read
  std::uint64_t measured_launch = 0;
  double ring_commit_rate = 0, direct_commit_rate = 0;  // the last measured (tx_stats)
  // adaptive: launch n's marks are marks[n % 2], so the next launch's start never overwrites
  // marks the host may still read
  pinned_buffer<T::launch_marks> marks;

  std::mutex mutex;  // guards rep, stop, failure
  std::condition_variable wake;
  bool stop = false;
  // Set by launch() without the mutex, which the thread holds through a whole pass: a launch
  // must not wait for a pass over the previous kernel's records. A wake-up lost in the race
  // only delays the next pass by the thread's back-off (at most a millisecond).
  std::atomic<bool> kicked = false;
  // sync() calls waiting for the mutex to run the replay kernels: the thread starts no pass.
  std::atomic<std::uint32_t> syncing = 0;
  std::exception_ptr failure;
  std::thread thread;
};

namespace {
// The heap's host and GPU state, recovered.
std::unique_ptr<tx_heap::impl> recovered(pool& p, std::string_view name, const T::heap_header& h,
                                         const tx_options& options) {
  auto state = std::make_unique<tx_heap::impl>(p, name, h, options);
  state->recover();
  return state;
}
}  // namespace

tx_heap::tx_heap(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
tx_heap::tx_heap(tx_heap&&) noexcept = default;
tx_heap& tx_heap::operator=(tx_heap&&) noexcept = default;
tx_heap::~tx_heap() = default;

tx_heap tx_heap::create(pool& p, std::string_view name, const tx_geometry& g,
                        const tx_options& options) {
  check_options(options);
  const T::heap_header h = T::make_header(g.words, g.logs, g.log_bytes);
  undo_slot_chunks({h.words, h.log_chunks, h.logs}, options, name);
  // The pool refuses a taken name (already_exists) and a heap it has no room for (out_of_memory).
  const std::uint64_t offset = p.allocate(name, h.common.object_bytes, T::kLineBytes, T::kTypeTag);
  char* object = p.host_ptr<char>(offset);
  // The root first, the header last: until the header is durable, open() rejects the object.
  T::heap_media(object, h, label_of(p, name)).write_root(0, 1, false, "tx.create.root");
  std::memcpy(object, &h, sizeof h);
  persist_at("tx.create.header", object, sizeof h);
  return open(p, name, options);
}

tx_heap tx_heap::open(pool& p, std::string_view name, const tx_options& options) {
  check_options(options);
  return tx_heap(recovered(p, name, find_heap(p, name), options));
}

tx_heap tx_heap::open(pool& p, std::string_view name, const tx_geometry& expected,
                      const tx_options& options) {
  check_options(options);
  const T::heap_header h = find_heap(p, name);
  const tx_geometry g = geometry_of(h);
  if (!(g == expected)) {
    throw_error(errc::layout_mismatch,
                label_of(p, name) + " has " + std::to_string(g.words) + " words and " +
                    std::to_string(g.logs) + " logs of " + std::to_string(g.log_bytes) +
                    " bytes, not the " + std::to_string(expected.words) + " words and " +
                    std::to_string(expected.logs) + " logs of " +
                    std::to_string(expected.log_bytes) +
                    " bytes asked for: open it with its own geometry, or create another heap");
  }
  return tx_heap(recovered(p, name, h, options));
}

tx_heap::impl& tx_heap::self() const {
  if (!impl_) throw_error(errc::invalid_argument, "gpm::tx_heap: this heap was moved from");
  return *impl_;
}

tx_ref tx_heap::ref() const { return tx_ref(self().view); }

T::launch_plan tx_heap::plan_launch(std::uint32_t blocks, std::uint32_t workers,
                                    cudaStream_t stream, const void* kernel) {
  impl& st = self();
  const tx_options& o = st.options;
  const bool adaptive = o.mode == tx_mode::adaptive;
  require(blocks >= 1, "tx_heap::launch: blocks must be at least 1");
  const std::uint32_t most_helpers = has_helpers(o.mode) ? 32 * o.helper_warps : 0;
  require(workers >= 32 && workers % 32 == 0 && workers + most_helpers <= kMaxBlockThreads,
          "tx_heap::launch: workers_per_block must be a multiple of 32 (whole warps) between 32 "
          "and " +
              std::to_string(kMaxBlockThreads - most_helpers) + ", got " + std::to_string(workers));
  require(std::uint64_t{blocks} * workers <= o.max_threads,
          "tx_heap::launch: " + std::to_string(std::uint64_t{blocks} * workers) +
              " worker threads exceed tx_options::max_threads = " + std::to_string(o.max_threads));
  require(!has_helpers(o.mode) || blocks <= st.geometry.logs,
          "tx_heap::launch: a " + std::string(to_string(o.mode)) +
              " launch gives each block its own log, and " + name() + " has " +
              std::to_string(st.geometry.logs) + " logs for " + std::to_string(blocks) +
              " blocks: launch fewer blocks or create more logs");
  require(!has_helpers(o.mode) || st.geometry.log_bytes / T::kChunkBytes <= (1ull << 32),
          "tx_heap::launch: helper warps address logs of at most 2^32 chunks (64 GiB), and " +
              name() + "'s are larger: create the heap with smaller logs");
  const impl::launch_choice choice =
      adaptive ? st.choose(kernel) : impl::launch_choice{.ring = o.mode == tx_mode::helpers};
  const bool ring = choice.ring;
  T::launch_plan plan;
  plan.view = st.view;
  if (adaptive) plan.view.slice_threshold = choice.slice_threshold;
  plan.view.workers_per_block = workers;
  plan.view.ring_chunks = ring ? o.ring_chunks : 0;
  plan.blocks = blocks;
  plan.threads_per_block = workers + (ring ? 32 * o.helper_warps : 0);
  plan.shared_bytes = ring ? T::ring_bytes(o.ring_chunks, workers) : 0;
  // Found once per shape and cap: the search asks the occupancy API up to ~20 times.
  const impl::shape_key shape{kernel, plan.threads_per_block, plan.shared_bytes};
  if (o.max_blocks_per_sm != 0) plan.shared_bytes = st.capped_bytes(shape, o.max_blocks_per_sm);
  st.measured_learner = nullptr;
  if (adaptive && o.learn_residency) {
    impl::residency_choice& r = st.residencies[shape];
    if (r.most == 0) r.most = blocks_fitting(kernel, plan.threads_per_block, plan.shared_bytes);
    const std::uint32_t blocks = r.learner.choose(r.most);
    if (blocks < r.most) plan.shared_bytes = st.capped_bytes(shape, blocks);
    st.measured_learner = &r.learner;
    st.measured_blocks = blocks;
  }
  if (adaptive) {
    // The monitor starts each launch afresh; the start of this launch's measurement.
    st.measured_launch = st.launches + 1;
    plan.view.marks = st.marks.device_data() + st.measured_launch % 2;
    plan.view.launch = st.measured_launch;
    gpm::launch(start_launch, 1, 1, 0, stream, st.view, plan.view.marks, choice.start_on);
  }
  ++st.launches;
  st.ring_launches += ring;
  st.kicked.store(true, std::memory_order_relaxed);
  st.wake.notify_all();
  return plan;
}

void tx_heap::launched(cudaStream_t stream, const void* kernel, const T::launch_plan& plan) {
  impl& st = self();
  st.last_launch.record(stream);
  impl::residency& r = st.resident;
  if (r.kernel != kernel || r.threads != plan.threads_per_block ||
      r.shared_bytes != plan.shared_bytes) {
    cudaFuncAttributes a{};
    check_cuda(cudaFuncGetAttributes(&a, kernel), "cudaFuncGetAttributes (tx_heap::launch)");
    r = {kernel, plan.threads_per_block, plan.shared_bytes, static_cast<std::uint32_t>(a.numRegs),
         detail::blocks_per_multiprocessor(kernel, plan.threads_per_block, plan.shared_bytes)};
  }
  if (st.options.mode == tx_mode::adaptive) st.measuring = true;
}

void tx_heap::sync(cudaStream_t stream) {
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (tx_heap::sync)");
  if (self().options.mode == tx_mode::volatile_only) return;
  std::uint64_t committed = 0;
  check_cuda(cudaMemcpyAsync(&committed, self().seq.data(), sizeof committed,
                             cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync (tx_heap::sync)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (tx_heap::sync)");
  if (self().options.mode == tx_mode::undo) {
    // Each undo commit was durable in the home image when it returned.
    const std::lock_guard lock(self().mutex);
    self().rep.mark_applied(committed);
    return;
  }
  // Applies while that makes progress. Records of kernels in other streams may still be on
  // their way: while the prefix waits for one, the host's cheap passes look for it, not the
  // replay kernels (each run clears its whole window).
  bool waiting = false;
  for (std::uint64_t last = 0, now = 0;
       (now = waiting ? self().pass() : self().apply_pending()) < committed; last = now) {
    waiting = now == last;
    if (waiting) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::uint64_t tx_heap::durable_seq() {
  return self().options.mode == tx_mode::volatile_only ? 0 : self().apply_pending();
}

void tx_heap::store(std::uint64_t first, const std::uint32_t* values, std::uint64_t count) {
  const std::uint64_t words = self().geometry.words;
  require(first <= words && count <= words - first,
          "tx_heap::store: words [" + std::to_string(first) + ", " + std::to_string(first + count) +
              ") are outside " + name() + "'s " + std::to_string(words) + " words");
  if (count == 0) return;
  require(values != nullptr, "tx_heap::store: " + std::to_string(count) +
                                 " words from a null pointer; nothing was stored");
  // Every logged commit must be in the home image first, or applying it later would undo this.
  sync(nullptr);
  std::uint32_t* home = self().rep.media().home() + first;
  std::memcpy(home, values, count * sizeof *values);
  persist_at("tx.store.home", home, count * sizeof *values);
  check_cuda(cudaMemcpy(self().work.data() + first, values, count * sizeof *values,
                        cudaMemcpyHostToDevice),
             "cudaMemcpy (tx_heap::store)");
}

void tx_heap::load(std::uint64_t first, std::uint32_t* out, std::uint64_t count) const {
  const std::uint64_t words = self().geometry.words;
  require(first <= words && count <= words - first,
          "tx_heap::load: words [" + std::to_string(first) + ", " + std::to_string(first + count) +
              ") are outside " + name() + "'s " + std::to_string(words) + " words");
  if (count == 0) return;
  require(out != nullptr, "tx_heap::load: " + std::to_string(count) + " words into a null pointer");
  check_cuda(
      cudaMemcpy(out, self().work.data() + first, count * sizeof *out, cudaMemcpyDeviceToHost),
      "cudaMemcpy (tx_heap::load)");
}

const tx_recovery& tx_heap::last_recovery() const { return self().recovery; }

tx_stats tx_heap::stats() const {
  tx_stats s;
  std::vector<std::uint64_t> counters(self().counters.size());
  self().counters.copy_to_host(counters.data(), counters.size());
  for (std::size_t i = 0; i < counters.size(); i += T::kCounters) {
    s.commits += counters[i];
    s.aborts += counters[i + 1];
    s.ring_commits += counters[i + 2];
  }
  T::bandwidth_monitor m;
  self().monitor.copy_to_host(&m, 1);
  s.slices_on = m.slices_on;
  s.slices_off = m.slices_off;
  s.switches = m.switches;
  s.switch_threshold = self().threshold;
  s.ring_commit_rate = self().ring_commit_rate;
  s.direct_commit_rate = self().direct_commit_rate;
  s.launches = self().launches;
  s.ring_launches = self().ring_launches;
  s.launch_registers = self().resident.registers;
  s.launch_blocks_per_sm = self().resident.blocks_per_sm;
  s.persisted_bytes = self().persisted_bytes();
  const std::lock_guard lock(self().mutex);
  s.durable_seq = self().rep.applied();
  s.replayed_on_gpu = self().replayed_on_gpu;
  s.replay_runs = self().replay_runs;
  s.applied_on_host = self().applied_on_host;
  self().occupancy.copy_to_host(s.ring_occupancy_ns.data(), s.ring_occupancy_ns.size());
  return s;
}

double tx_ring_occupancy(const std::array<std::uint64_t, T::kOccupancyBins>& bins,
                         double fraction) {
  require(fraction > 0 && fraction <= 1,
          "tx_ring_occupancy: fraction must be in (0, 1], not " + std::to_string(fraction));
  std::uint64_t total = 0;
  for (const std::uint64_t b : bins) total += b;
  if (total == 0) return 0;
  const double reach = fraction * static_cast<double>(total);
  std::uint64_t below = 0;
  for (std::size_t i = 0; i < bins.size(); ++i) {
    below += bins[i];
    if (static_cast<double>(below) >= reach) {
      return static_cast<double>(i + 1) / static_cast<double>(bins.size());
    }
  }
  return 1;
}

const tx_geometry& tx_heap::geometry() const { return self().geometry; }
const tx_options& tx_heap::options() const { return self().options; }
const std::string& tx_heap::name() const { return self().name; }

}  // namespace gpm
