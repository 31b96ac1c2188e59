// The runner of the gpmbench `tx` workloads (tx_bench.hpp): persistence modes, launches, and
// the measurement of one application in one mode.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include <gpm/pool/pool.hpp>

#include "gpmbench/resources.hpp"
#include "gpmbench/stats.hpp"
#include "gpmbench/timing.hpp"
#include "workloads/tx/tx_bench.hpp"

namespace gpmbench::tx {

const std::vector<persistence>& persistences() {
  static const std::vector<persistence> all = [] {
    const std::pair<gpm::tx_mode, const char*> modes[] = {
        {gpm::tx_mode::volatile_only,
         "the same STM on the GPU's working copy, nothing logged or persisted"},
        {gpm::tx_mode::direct,
         "redo records persisted by the committing thread (the paper's baseline)"},
        {gpm::tx_mode::hcl,
         "redo records persisted by the committing threads, striped by lane so a warp's stores "
         "coalesce"},
        {gpm::tx_mode::helpers,
         "redo records handed to a ring in shared memory, persisted by a helper warp per block"},
        {gpm::tx_mode::adaptive,
         "helper warps switched on and off by the measured persist bandwidth against a "
         "threshold calibrated in this run"},
        {gpm::tx_mode::undo,
         "GPM-style undo logging: old values logged and persisted by the committing thread, new "
         "values persisted in place, the record retired"},
    };
    std::vector<persistence> v;
    for (const auto& [m, summary] : modes)
      v.push_back({std::string(gpm::to_string(m)), m, summary});
    return v;
  }();
  return all;
}

const persistence& persistence_named(const std::string& name) {
  for (const persistence& p : persistences()) {
    if (p.name == name) return p;
  }
  throw std::logic_error("gpmbench tx: no persistence mode named " + name);
}

launch_shape paper_launch(const mode_context& ctx) {
  return ctx.options.quick ? launch_shape{8, 64} : launch_shape{512, 256};
}

launch_shape filling_launch(const mode_context& ctx) {
  const geometry g = filling_geometry(ctx);
  return {g.blocks, g.threads};
}

std::uint64_t scaled(const mode_context& ctx, std::uint64_t paper, std::uint64_t host_divisor,
                     std::uint64_t quick_divisor, std::uint64_t floor) {
  const std::uint64_t divisor = ctx.options.quick     ? quick_divisor
                                : ctx.device.emulated ? host_divisor
                                                      : 1;
  return std::max(floor, paper / divisor);
}

namespace {

// The Fig. 6 sweep that finds the adaptive mode's threshold (gpm::tx_calibrate): the library's
// default on a GPU, a smaller one on the emulator and with --quick.
gpm::tx_calibration calibration_for(const mode_context& ctx) {
  gpm::tx_calibration c;
  if (ctx.options.quick || ctx.device.emulated) {
    c.max_threads = 4096;
    c.reps = 4;
  }
  return c;
}

// The adaptive mode's switching threshold in bytes/s, measured on this machine by the first
// call in the process (gpm::tx_calibrate caches it) in a pool of its own.
double calibrated_threshold(const mode_context& ctx) {
  const gpm::tx_calibration c = calibration_for(ctx);
  const std::uint64_t blocks = std::max<std::uint64_t>(1, c.max_threads / c.workers_per_block);
  const std::uint64_t record_bytes = (c.writes + 4) / 2 * 16;
  const std::uint64_t bytes =
      c.max_threads * c.writes * 4 +
      blocks * (std::uint64_t{c.reps} * c.workers_per_block * record_bytes + 128) + (64 << 10);
  bench_pool pool(ctx, "tx-calibrate",
                  pool_bytes_for((bytes + bench_pool::kPageBytes - 1) / bench_pool::kPageBytes *
                                 bench_pool::kPageBytes),
                  bench_pool::kNoObject);
  return gpm::tx_calibrate(pool.pool(), c);
}

}  // namespace

std::uint64_t ceiling_bytes(const mode_context& ctx) {
  return ctx.options.quick ? 4 * kMiB : ctx.device.emulated ? 32 * kMiB : 256 * kMiB;
}

failure_counter::failure_counter() : count_(1) { clear(); }

void failure_counter::clear() { count_.fill_bytes(0); }

void failure_counter::expect_none(const std::string& what) const {
  std::uint64_t n = 0;
  count_.copy_to_host(&n, 1);
  if (n != 0) {
    check_failed(what + ": " + std::to_string(n) +
                 " transactions ended in a status other than "
                 "committed");
  }
}

void store_zeroes(gpm::tx_heap& heap) {
  const std::vector<std::uint32_t> zeroes(heap.geometry().words, 0);
  heap.store(0, zeroes.data(), zeroes.size());
}

namespace {

constexpr std::uint64_t kChunkBytes = 16;  // a ring or log chunk: two address-value pairs

// The heap's geometry for `app` at `launch`: a log per block, each large enough for its share of
// a whole repeat's records twice over, so that a repeat never waits for the host to apply
// records (the host's reproducer is measured by the time to durable instead).
gpm::tx_geometry geometry_for(const application& app, launch_shape launch) {
  const std::uint64_t record_bytes = (app.record_words() + 4) / 2 * kChunkBytes;
  const std::uint64_t per_block = (app.transactions() + launch.blocks - 1) / launch.blocks;
  const std::uint64_t log_bytes =
      std::max<std::uint64_t>(64 << 10, (2 * per_block * record_bytes + 4095) / 4096 * 4096);
  return {app.words(), launch.blocks, log_bytes};
}

// The heap object's bytes (header, roots, a control line per log, home image, logs), with room
// to spare for alignment, in whole pages as pools are.
std::uint64_t heap_bytes(const gpm::tx_geometry& g) {
  const std::uint64_t bytes =
      g.words * 4 + std::uint64_t{g.logs} * (g.log_bytes + 128) + (64 << 10);
  return (bytes + bench_pool::kPageBytes - 1) / bench_pool::kPageBytes * bench_pool::kPageBytes;
}

double median_of(std::vector<double> v) { return summarize(v).median_s; }

}  // namespace

measurement measure(const mode_context& ctx, application& app, const mode_setup& setup) {
  const launch_shape launch = setup.launch(ctx);
  const bool adaptive = setup.persist.mode == gpm::tx_mode::adaptive;
  const bool ring = setup.persist.mode == gpm::tx_mode::helpers || adaptive;
  const bool persistent = setup.persist.mode != gpm::tx_mode::volatile_only;
  const gpm::tx_geometry g = geometry_for(app, launch);
  gpm::tx_options o;
  o.mode = setup.persist.mode;
  o.reads = setup.reads;
  o.ring_chunks = (setup.ring_entries + 1) / 2;
  o.max_blocks_per_sm = setup.max_blocks_per_sm;
  o.learn_residency = setup.learn_residency;
  o.max_threads = std::uint64_t{launch.blocks} * launch.workers;
  if (adaptive) o.switch_threshold = calibrated_threshold(ctx);
  bench_pool pool(ctx, "tx", pool_bytes_for(heap_bytes(g)), bench_pool::kNoObject);
  // The heap goes before its pool.
  std::optional<gpm::tx_heap> heap(gpm::tx_heap::create(pool.pool(), "heap", g, o));
  const gpm::stream s;

  const std::vector<std::string> phase_names = app.phases();
  std::vector<std::vector<double>> phase_s(phase_names.size());
  std::vector<double> durable_s;
  std::uint64_t commits = 0, aborts = 0, bytes = 0;
  // What the timed repeats' sync() calls applied: replay kernels (in how many runs) and host.
  std::uint64_t synced_on_gpu = 0, synced_on_host = 0, sync_runs = 0;
  // Ring modes: how full the rings stood over the timed repeats' kernels (the paper's Fig. 15).
  decltype(gpm::tx_stats::ring_occupancy_ns) occupancy{};
  // Adaptive mode learns from its launches (the ring or not, and with learn_residency each
  // kernel's blocks an SM: a few probe launches), on the heap it measures, so its first launches
  // are a program's start, not its steady state. An interleaved run makes a new heap each round
  // with no warm-up after the first: untimed launches let each heap learn before its timed ones.
  const int learning = adaptive ? kLearningLaunches : 0;
  for (int i = 0; i < learning; ++i) {
    app.reset(*heap);
    app.run(*heap, launch, s);
    heap->sync(s);
  }
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    app.reset(*heap);
    const gpm::tx_stats before = heap->stats();
    const std::vector<double> phases = app.run(*heap, launch, s);
    const gpm::tx_stats ran = heap->stats();
    const double durable = seconds_on_host([&] { heap->sync(s); });
    const gpm::tx_stats after = heap->stats();
    if (after.commits - before.commits != app.transactions()) {
      check_failed("a repeat committed " + std::to_string(after.commits - before.commits) +
                   " transactions, not the " + std::to_string(app.transactions()) + " it ran");
    }
    double total = 0;
    for (double t : phases) total += t;
    if (call >= ctx.options.warmup) {
      for (std::size_t k = 0; k < phase_s.size(); ++k) phase_s[k].push_back(phases.at(k));
      durable_s.push_back(durable);
      synced_on_gpu += after.replayed_on_gpu - ran.replayed_on_gpu;
      synced_on_host += after.applied_on_host - ran.applied_on_host;
      sync_runs += after.replay_runs - ran.replay_runs;
      commits += after.commits - before.commits;
      aborts += after.aborts - before.aborts;
      for (std::size_t i = 0; i < occupancy.size(); ++i) {
        occupancy[i] += ran.ring_occupancy_ns[i] - before.ring_occupancy_ns[i];
      }
      bytes = after.persisted_bytes - before.persisted_bytes;
    }
    return total;
  });
  app.check(*heap, true);
  if (persistent && bytes == 0) check_failed("a persistent mode persisted no bytes");

  // A simulated stop: one more repeat, then the heap goes away without sync(), with records
  // still waiting in its logs for the host; reopening it recovers them.
  app.reset(*heap);
  app.run(*heap, launch, s);
  const gpm::tx_stats stopped_stats = heap->stats();
  heap.reset();
  const double recovery_s =
      seconds_on_host([&] { heap.emplace(gpm::tx_heap::open(pool.pool(), "heap", g, o)); });
  app.check(*heap, false);
  const gpm::tx_recovery rec = heap->last_recovery();
  const gpm::tx_stats rec_stats = heap->stats();

  // The same with the host's reproducer in place of the replay kernels (tx_options::gpu_replay
  // false), side by side: another stopped repeat recovered, then a repeat synced.
  const bool redo = persistent && setup.persist.mode != gpm::tx_mode::undo;
  double recovery_host_s = 0, durable_host_s = 0;
  if (redo) {
    gpm::tx_options host = o;
    host.gpu_replay = false;
    app.reset(*heap);
    app.run(*heap, launch, s);
    heap.reset();
    recovery_host_s =
        seconds_on_host([&] { heap.emplace(gpm::tx_heap::open(pool.pool(), "heap", g, host)); });
    app.check(*heap, false);
    app.reset(*heap);
    app.run(*heap, launch, s);
    durable_host_s = seconds_on_host([&] { heap->sync(s); });
    app.check(*heap, true);
  }

  m.sizes = app.sizes();
  m.sizes.insert(m.sizes.end(), {{"blocks", launch.blocks},
                                 {"threads_per_block", launch.workers},
                                 {"transactions", app.transactions()},
                                 {"logs", g.logs},
                                 {"log_bytes", g.log_bytes}});
  if (ring) {
    m.sizes.insert(m.sizes.end(),
                   {{"helper_warps", o.helper_warps}, {"ring_entries", 2ull * o.ring_chunks}});
  }
  m.throughput = mega_operations(app.transactions());
  m.bytes_persisted = bytes;
  const double median_s = median_of(m.times_s);
  m.metrics = {{"aborts_per_commit", static_cast<double>(aborts) / static_cast<double>(commits)},
               {"learning_launches", static_cast<double>(learning)},
               {"persist_GBps", static_cast<double>(bytes) / median_s / 1e9},
               {"durable_s", median_of(durable_s)},
               {"recovery_s", recovery_s},
               {"recovery_replayed", static_cast<double>(rec.replayed)},
               // what the repeats' last kernel took (BVH: the reduce), as the stopped repeat ran it
               {"kernel_registers", static_cast<double>(stopped_stats.launch_registers)},
               {"resident_blocks_per_sm", static_cast<double>(stopped_stats.launch_blocks_per_sm)}};
  if (redo) {
    const double repeats = static_cast<double>(durable_s.size());
    m.metrics.insert(m.metrics.end(),
                     {{"sync_gpu_records", static_cast<double>(synced_on_gpu) / repeats},
                      {"sync_host_records", static_cast<double>(synced_on_host) / repeats},
                      {"sync_replay_runs", static_cast<double>(sync_runs) / repeats},
                      {"recovery_gpu_records", static_cast<double>(rec_stats.replayed_on_gpu)},
                      {"durable_host_s", durable_host_s},
                      {"recovery_host_s", recovery_host_s}});
  }
  if (adaptive) {
    // Since the heap was created: warm-up, timed and stopped repeats.
    const gpm::tx_stats& a = stopped_stats;
    m.metrics.insert(m.metrics.end(),
                     {{"switch_threshold_GBps", a.switch_threshold / 1e9},
                      {"ring_launch_fraction",
                       static_cast<double>(a.ring_launches) / static_cast<double>(a.launches)},
                      {"ring_commit_fraction",
                       static_cast<double>(a.ring_commits) / static_cast<double>(a.commits)},
                      {"slices_on", static_cast<double>(a.slices_on)},
                      {"slices_off", static_cast<double>(a.slices_off)},
                      {"switches", static_cast<double>(a.switches)}});
  }
  // Percentiles of the rings' occupancy over time, as fractions of the ring (1/64 steps); none
  // where no launch had the ring (an adaptive mode that kept it off).
  if (ring && std::any_of(occupancy.begin(), occupancy.end(), [](auto b) { return b != 0; })) {
    for (const auto& [name, f] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"max", 1.0}}) {
      m.metrics.emplace_back(std::string("ring_occupancy_") + name,
                             gpm::tx_ring_occupancy(occupancy, f));
    }
  }
  for (std::size_t k = 0; k < phase_names.size(); ++k) {
    m.metrics.emplace_back(phase_names[k] + "_s", median_of(phase_s[k]));
  }
  if (persistent) m.compared_metric = "persist_GBps";
  return m;
}

mode tx_mode_of(const std::string& name, const std::string& summary, application_factory make,
                mode_setup setup) {
  const bool persistent = setup.persist.mode != gpm::tx_mode::volatile_only;
  return {name, summary, persistent ? "persist_stream" : "",
          [make, setup](const mode_context& ctx) {
            const std::unique_ptr<application> app = make(ctx);
            return measure(ctx, *app, setup);
          }};
}

mode ceiling_mode() { return persist_stream_ceiling_mode(ceiling_bytes); }

workload paper_workload(const std::string& name, const std::string& summary,
                        application_factory make) {
  workload w{name, summary, {ceiling_mode()}};
  for (const bool fill : {false, true}) {
    const std::string at = fill ? ", at a launch that fills the GPU" : ", at the paper's launch";
    const auto launch = fill ? filling_launch : paper_launch;
    for (const persistence& p : persistences()) {
      w.modes.push_back(tx_mode_of(fill ? p.name + "@fill" : p.name, p.summary + at, make,
                                   {p, launch}));
    }
    // Adaptive mode learning each kernel's blocks an SM too (tx_options::learn_residency).
    const persistence& adaptive = persistence_named("adaptive");
    w.modes.push_back(tx_mode_of(
        fill ? "adaptive-learned@fill" : "adaptive-learned",
        adaptive.summary + ", blocks an SM learnt per kernel" + at, make,
        {adaptive, launch, kPaperRingEntries, gpm::tx_reads::locked, 0, true}));
  }
  return w;
}

}  // namespace gpmbench::tx
