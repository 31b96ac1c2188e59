// What the gpmbench `tx` workloads share (docs/workloads/tx.md): the persistence modes of
// gpm::tx_heap measured side by side, the two launches (the Helper Warps paper's and one that
// fills the GPU), and the runner that measures one application in one mode. An application is
// the paper's benchmark (ATM, Hashtable, BVH) or a micro-benchmark: it sets up a heap, runs its
// transactions in timed kernels and checks the result; the runner owns the pool, the heap, the
// repeats and every figure of the record. Nothing here knows an application's data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gpm/platform/kernel.cuh>
#include <gpm/tx/tx_heap.cuh>

#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"

namespace gpmbench::tx {

// How a mode makes commits durable: its record name and the library's mode.
struct persistence {
  std::string name;  // "volatile", "redo-direct", "helpers"
  gpm::tx_mode mode;
  std::string summary;
};

// Every persistence mode gpm::tx offers, in running order: volatile first (the same STM without
// persistence, what the persistent modes are compared with), then the persistent ones.
const std::vector<persistence>& persistences();
const persistence& persistence_named(const std::string& name);

// A tx_heap::launch: blocks of worker threads (helper warps come on top in helpers mode).
struct launch_shape {
  std::uint32_t blocks = 0;
  std::uint32_t workers = 0;
};
// The paper's launch, 512 blocks of 256 threads (TPDS'20 §6.3); with --quick, 8 blocks of 64.
launch_shape paper_launch(const mode_context& ctx);
// Blocks that fill the GPU (filling_geometry: --threads-per-block, --blocks-per-sm).
launch_shape filling_launch(const mode_context& ctx);

// Ring entries (address-value pairs, as the paper counts them) in helpers mode: the paper's
// choice after its sweep (§7.3: 1,300 entries). A ring chunk holds two entries.
inline constexpr std::uint32_t kPaperRingEntries = 1300;

// One application the runner measures. Every transaction of a repeat must commit: the runner
// checks the heap's commit count after each repeat against transactions().
class application {
 public:
  virtual ~application() = default;
  virtual std::uint64_t words() const = 0;         // the heap's 32-bit words
  virtual std::uint64_t transactions() const = 0;  // committed by one repeat
  virtual std::uint32_t record_words() const = 0;  // the most words one transaction writes
  virtual named_counts sizes() const = 0;          // what defines the problem, for the record
  // Names of a repeat's timed kernels when it has more than one (BVH: "build", "reduce"); their
  // medians are recorded as `<name>_s`.
  virtual std::vector<std::string> phases() const { return {}; }
  // Before every repeat, untimed: gives the heap its initial contents (tx_heap::store).
  virtual void reset(gpm::tx_heap& heap) = 0;
  // One repeat's kernels on `stream`: the seconds of each (at least one), timed on the stream.
  // Throws (check_failed) when a transaction ended in any status but committed.
  virtual std::vector<double> run(gpm::tx_heap& heap, launch_shape launch, cudaStream_t stream) = 0;
  // Checks the heap's working copy. complete: after a repeat and sync(), every transaction of
  // the repeat is in it; otherwise, after a stop and recovery, the reset state with some prefix
  // of the repeat's commits (in commit order) applied. Throws (check_failed) when wrong.
  virtual void check(const gpm::tx_heap& heap, bool complete) = 0;
};

// Sets every word of the heap to 0 (an application's reset).
void store_zeroes(gpm::tx_heap& heap);

using application_factory = std::function<std::unique_ptr<application>(const mode_context&)>;

// Untimed launches adaptive modes make on their heap before the warm-up and timed repeats: the
// ring's first and second launches and residency's probes down from 3 blocks an SM
// (src/tx/residency.hpp).
inline constexpr int kLearningLaunches = 5;

// What one measured mode runs: a persistence mode at a launch, with `ring_entries` ring entries
// in helpers mode, reads locked (the paper's) or versioned, and at most `max_blocks_per_sm`
// blocks an SM (0: as many as fit; tx_options::max_blocks_per_sm) or, in adaptive mode, the
// number learnt per kernel (tx_options::learn_residency).
struct mode_setup {
  persistence persist;
  std::function<launch_shape(const mode_context&)> launch;
  std::uint32_t ring_entries = kPaperRingEntries;
  gpm::tx_reads reads = gpm::tx_reads::locked;
  std::uint32_t max_blocks_per_sm = 0;
  bool learn_residency = false;
};

// Measures `app` in one mode: a pool and heap of their own, ctx.repeat()ed repeats (reset, the
// timed kernels, then sync() timed as the time to durable), the checks, then one more repeat
// stopped without sync() and the heap reopened (the recovery time) and checked again. Records:
// committed transactions per second (Mop/s), aborts per commit, bytes persisted, the achieved
// persist bandwidth (metric persist_GBps, compared with the persist_stream ceiling), time to
// durable, recovery time and records replayed.
measurement measure(const mode_context& ctx, application& app, const mode_setup& setup);

// The bytes of the persist_stream ceiling the tx workloads measure before their modes.
std::uint64_t ceiling_bytes(const mode_context& ctx);

// A mode measuring `setup` on a new application from `make`; persistent modes name the
// persist_stream ceiling (a workload with persistent modes starts with ceiling_mode()).
mode tx_mode_of(const std::string& name, const std::string& summary, application_factory make,
                mode_setup setup);
mode ceiling_mode();

// A paper workload: the persist_stream ceiling, every persistence mode at the paper's launch
// (the mode's own name), then every one at the filling launch ("<name>@fill").
workload paper_workload(const std::string& name, const std::string& summary,
                        application_factory make);

// Sizes by backend: the paper's on a GPU, `host_divisor` times smaller on the emulator, and
// `quick_divisor` times smaller with --quick (never below `floor`).
std::uint64_t scaled(const mode_context& ctx, std::uint64_t paper, std::uint64_t host_divisor,
                     std::uint64_t quick_divisor, std::uint64_t floor = 2);

// A device counter of the transactions that did not commit, for an application's kernels.
class failure_counter {
 public:
  failure_counter();
  std::uint64_t* device() const { return count_.data(); }
  // Zeroes the counter.
  void clear();
  // Throws (check_failed) naming `what` when a kernel counted any failure since clear().
  void expect_none(const std::string& what) const;
  // One kernel of `body` (which counts into device()) on the heap, timed on `stream`; then
  // expect_none(what). Returns its seconds.
  template <class Body>
  double timed_launch(gpm::tx_heap& heap, launch_shape launch, cudaStream_t stream, Body body,
                      const std::string& what) {
    clear();
    const double t = seconds_on_stream(
        stream, [&] { heap.launch(launch.blocks, launch.workers, body, stream); });
    expect_none(what);
    return t;
  }

 private:
  gpm::device_buffer<std::uint64_t> count_;
};

// Kernel side: adds a worker's count of transactions that did not commit (when there are any).
__device__ inline void count_failures(std::uint64_t* counter, std::uint64_t failed) {
  if (failed != 0) {
    gpm::atomic_ref<std::uint64_t, gpm::thread_scope::device>(*counter).fetch_add(
        failed, gpm::memory_order_relaxed);
  }
}

}  // namespace gpmbench::tx
