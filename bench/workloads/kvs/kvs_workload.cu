// gpmbench workloads `kvs_set` and `kvs_mixed`: gpKVS (GPM, ASPLOS'22 §6, Figures 9-11, Tables 4
// and 5). Batches of operations on the 8-way table of kvs_table.cuh, every batch failure-atomic:
//   kvs_set    batches of SETs, keys uniform over the key universe, the table starting empty
//   kvs_mixed  batches of 95% GETs and 5% SETs, Zipf 0.99 keys, the whole universe preloaded
// Modes (docs/workloads/kvs.md): gpm (undo log on HCL, persisted in the kernel), gpm-conv (the
// same on a conventional partitioned log), gpm-ndp (the buckets a batch will change are logged
// ahead by the GPU, written back by CPU threads; the kernel neither logs nor persists; CPU threads
// write the changed buckets back), cap-mm / cap-fs / cap-fs-disk (the table lives in GPU memory;
// after each batch the whole table is copied to the inactive of two durable copies, which then
// becomes current), snapshot (gpm, then gpm::pool::snapshot to disk after each batch), cpu
// (CPU threads, per-thread flat undo logs). After timing, every mode's durable table is compared
// with the host's replay of the same batches; gpm and gpm-conv also time recovery of a batch
// interrupted just before its commit (restore_s, restore_pct_of_op: the paper's Table 5).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include "gpmbench/baselines.hpp"
#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"
#include "workloads/common/batch_modes.hpp"
#include "workloads/common/cap_copies.hpp"
#include "workloads/common/ndp_log_ahead.hpp"
#include "workloads/common/undo_logs.cuh"
#include "workloads/kvs/kvs_cpu.hpp"
#include "workloads/kvs/kvs_kernels.cuh"
#include "workloads/kvs/kvs_table.cuh"

namespace gpmbench {

namespace kvs {
namespace {

struct config {
  std::string workload;
  std::uint64_t universe;
  std::uint64_t ops_per_batch;
  std::uint64_t batches;
  std::uint32_t set_percent;
  double theta;
  bool preload;
};

op_stream stream_of(const config& c) {
  return {zipf_distribution(c.universe, c.theta), 0x6b7673ull, c.set_percent};
}

std::uint64_t table_bytes(const config& c) {
  return table::object_bytes(table::buckets_for(c.universe));
}

// What every GPU strategy needs: the filling geometry, the stream, the bucket locks and epochs.
struct gpu_part {
  gpu_part(const mode_context& ctx, std::uint64_t buckets)
      : g(filling_geometry(ctx)), scratch(buckets) {
    if (g.threads % kWays != 0) {
      throw usage_error(
          "gpKVS needs --threads-per-block to be a multiple of 8 (a group of 8 "
          "threads serves a key)");
    }
  }
  std::uint64_t groups() const { return std::uint64_t{g.blocks} * g.threads / kWays; }
  template <class Undo>
  void batch(const table_view& t, const Undo& undo, const op_stream& ops, std::uint64_t b,
             std::uint64_t count) {
    scratch.order_by_region(g.blocks, g.threads, s, t, ops, b, count);
    gpm::launch(run_batch<Undo>, g.blocks, g.threads, 0, s, t, scratch.view(), undo, ops, b, count,
                scratch.next_epoch());
    s.synchronize();
  }
  void preload_into(const table_view& t, std::uint64_t universe) {
    gpm::launch(preload, g.blocks, g.threads, 0, s, t, scratch.view(), universe,
                scratch.next_epoch());
    s.synchronize();
  }
  geometry g;
  gpm::stream s;
  batch_scratch scratch;
};

// ---- gpm, gpm-conv, snapshot: undo-logged in the kernel --------------------------------------

// Log is the undo transaction's: hcl_log (gpm, snapshot) or conv_log (gpm-conv).
template <class Log>
class logged_strategy {
 public:
  logged_strategy(const mode_context& ctx, const config& c, const std::string& mode, bool snapshot)
      : gpu_(ctx, table::buckets_for(c.universe)),
        per_thread_(log_bytes_per_thread(c)),
        pool_(ctx, c.workload + "-" + mode,
              batch_pool_bytes(table_bytes(c) + undo_type::object_bytes(undo_shape_())),
              bench_pool::kNoObject),
        table_(table::create(pool_.pool(), "kvs", table::buckets_for(c.universe))),
        log_(undo_type::create(pool_.pool(), "kvs.undo", undo_shape_())),
        snapshot_(snapshot) {}

  void preload(std::uint64_t universe) {
    gpu_.preload_into(table_.device(), universe);
    gpm::write_back(table_.host().buckets, table_.bytes());
  }
  void batch(const op_stream& ops, std::uint64_t b, std::uint64_t count) {
    log_.begin();
    gpu_.batch(table_.device(), undo_of(log_), ops, b, count);
    log_.commit();
    if (snapshot_) snapshot_bytes_ += pool_.pool().snapshot().bytes_written;
  }
  // Runs batch `b` up to just before its commit, then times its recovery (the paper's Table 5).
  double restore_seconds(const op_stream& ops, std::uint64_t b, std::uint64_t count) {
    log_.begin();
    gpu_.batch(table_.device(), undo_of(log_), ops, b, count);
    // The crash comes after the batch's work: none of it, on any stream, is left to recovery.
    gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before recovery");
    return seconds_on_host([&] {
      if (!log_.recover()) check_failed("kvs: recovery found no batch to undo");
    });
  }
  const gpm::undo_recovery& last_recovery() const { return log_.last_recovery(); }
  batch_counters counters() const { return gpu_.scratch.counters(); }
  std::uint64_t bytes_persisted(const batch_counters& c) const {
    return c.sets * sizeof(slot) + c.logged * kEntryBytes + snapshot_bytes_;
  }
  table_view durable_view() const { return table_.host(); }

 private:
  using undo_type = gpm::basic_undo_tx<Log>;
  // An undo entry: the slot's 16 old bytes, with the transaction's record and the log's trailer.
  static constexpr std::uint64_t kEntryBytes = undo_type::entry_footprint(sizeof(slot));

  // A group may log every operation it serves (all SETs), its lanes in turn (set_key).
  std::uint64_t log_bytes_per_thread(const config& c) const {
    const std::uint64_t per_group = (c.ops_per_batch + gpu_.groups() - 1) / gpu_.groups();
    return (per_group + kWays - 1) / kWays * kEntryBytes;
  }
  typename undo_type::shape_type undo_shape_() const {
    return undo_shape(static_cast<Log*>(nullptr), gpu_.g.blocks, gpu_.g.threads, per_thread_);
  }

  gpu_part gpu_;
  std::uint64_t per_thread_;
  bench_pool pool_;
  table table_;
  undo_type log_;
  bool snapshot_;
  std::uint64_t snapshot_bytes_ = 0;
};

// ---- gpm-ndp: logged ahead by the GPU, persisted by CPU threads -------------------------------

class ndp_strategy {
 public:
  ndp_strategy(const mode_context& ctx, const config& c)
      : gpu_(ctx, table::buckets_for(c.universe)),
        pool_(ctx, c.workload + "-gpm-ndp",
              batch_pool_bytes(table_bytes(c) + c.ops_per_batch * (16 + sizeof(bucket)) + 4096),
              bench_pool::kNoObject),
        table_(table::create(pool_.pool(), "kvs", table::buckets_for(c.universe))),
        log_(pool_.pool(), "kvs.undo", c.ops_per_batch, sizeof(bucket)) {}

  void preload(std::uint64_t universe) {
    gpu_.preload_into(table_.device(), universe);
    log_.persister().persist(table_.host().buckets, table_.bytes());
  }
  // The log names the home buckets of the batch's SETs: the ones the batch may change.
  void batch(const op_stream& ops, std::uint64_t b, std::uint64_t count) {
    const std::uint64_t logged = log_.log(
        gpu_.s, [&](unsigned char* entries, std::uint64_t entry_bytes, unsigned long long* used) {
          gpm::launch(log_home_buckets, gpu_.g.blocks, gpu_.g.threads, 0, gpu_.s, table_.device(),
                      pool_.pool().ref(), entries, entry_bytes, ops, b, count, used);
        });
    gpu_.batch(table_.device(), no_undo{}, ops, b, count);
    written_back_ += log_.write_back_and_commit(logged);
  }
  batch_counters counters() const { return gpu_.scratch.counters(); }
  std::uint64_t bytes_persisted(const batch_counters&) const {
    return log_.bytes_persisted() + written_back_;
  }
  table_view durable_view() const { return table_.host(); }

 private:
  gpu_part gpu_;
  bench_pool pool_;
  table table_;
  ndp_log_ahead log_;
  std::uint64_t written_back_ = 0;
};

// ---- cap-mm, cap-fs, cap-fs-disk: the table in GPU memory, copied whole after each batch ------

// The views of a durable copy (cap_copies.hpp) as a table.
class cap_mm_target {
 public:
  cap_mm_target(const mode_context& ctx, const config& c, std::uint64_t bytes)
      : copies_(ctx, c.workload + "-cap-mm", bytes), buckets_(table::buckets_for(c.universe)) {}
  void save(const bucket* gpu_table, cudaStream_t s) { copies_.save(gpu_table, s); }
  std::uint64_t bytes_persisted() const { return copies_.bytes_persisted(); }
  table_view durable_view() const {
    return {reinterpret_cast<bucket*>(const_cast<unsigned char*>(copies_.current())), buckets_};
  }

 private:
  cap_mm_copies copies_;
  std::uint64_t buckets_;
};

class cap_fs_target {
 public:
  // The files on disk (power-loss durable) or in the run's pool directory (tmpfs).
  cap_fs_target(const mode_context& ctx, bool on_disk, const config& c, std::uint64_t bytes)
      : copies_(on_disk ? ctx.disk_dir : ctx.pm_dir, "kvs", bytes),
        buckets_(table::buckets_for(c.universe)) {
    if (on_disk) note_if_in_memory(ctx.disk_dir);
  }
  void save(const bucket* gpu_table, cudaStream_t s) { copies_.save(gpu_table, s); }
  std::uint64_t bytes_persisted() const { return copies_.bytes_persisted(); }
  table_view durable_view() {
    readback_ = copies_.read_current();
    return {reinterpret_cast<bucket*>(readback_.data()), buckets_};
  }

 private:
  cap_fs_copies copies_;
  std::uint64_t buckets_;
  std::vector<unsigned char> readback_;
};

template <class Target>
class cap_strategy {
 public:
  template <class... TargetArgs>
  cap_strategy(const mode_context& ctx, const config& c, TargetArgs&&... args)
      : gpu_(ctx, table::buckets_for(c.universe)),
        table_(table::buckets_for(c.universe)),
        target_(ctx, std::forward<TargetArgs>(args)..., c, table_.bytes()) {
    gpm::check_cuda(cudaMemset(table_.data(), 0, table_.bytes()), "cudaMemset");
  }
  void preload(std::uint64_t universe) {
    gpu_.preload_into(view(), universe);
    target_.save(table_.data(), gpu_.s);
  }
  void batch(const op_stream& ops, std::uint64_t b, std::uint64_t count) {
    gpu_.batch(view(), no_undo{}, ops, b, count);
    target_.save(table_.data(), gpu_.s);
  }
  batch_counters counters() const { return gpu_.scratch.counters(); }
  std::uint64_t bytes_persisted(const batch_counters&) const { return target_.bytes_persisted(); }
  table_view durable_view() { return target_.durable_view(); }

 private:
  table_view view() const { return {table_.data(), table_.size()}; }
  gpu_part gpu_;
  gpm::device_buffer<bucket> table_;
  Target target_;
};

// ---- cpu ---------------------------------------------------------------------------------------

class cpu_strategy {
 public:
  cpu_strategy(const mode_context& ctx, const config& c)
      : pool_(ctx, c.workload + "-cpu",
              batch_pool_bytes(table_bytes(c) + (c.ops_per_batch + team_.size()) * 32 + 4096),
              bench_pool::kNoObject),
        table_(table::create(pool_.pool(), "kvs", table::buckets_for(c.universe))),
        undo_(flat_undo::create(pool_.pool(), "kvs.undo", team_.size(),
                                (c.ops_per_batch + team_.size() - 1) / team_.size(), sizeof(slot))),
        store_(table_.host(), team_) {}
  void preload(std::uint64_t universe) { add(store_.preload(universe)); }
  void batch(const op_stream& ops, std::uint64_t b, std::uint64_t count) {
    add(store_.run_batch(undo_, ops, b, count, bytes_));
  }
  batch_counters counters() const { return counters_; }
  std::uint64_t bytes_persisted(const batch_counters&) const { return bytes_; }
  table_view durable_view() const { return table_.host(); }

 private:
  void add(const batch_counters& c) {
    counters_.log_failures += c.log_failures, counters_.evictions += c.evictions;
    counters_.get_misses += c.get_misses, counters_.bad_gets += c.bad_gets;
    counters_.sets += c.sets, counters_.logged += c.logged;
  }
  cpu_team team_;
  bench_pool pool_;
  table table_;
  flat_undo undo_;
  cpu_store store_;
  batch_counters counters_{};
  std::uint64_t bytes_ = 0;
};

// ---- the modes ---------------------------------------------------------------------------------

// gpKVS for batch_modes (batch_modes.hpp): its sizes, one mode's run, and its strategies.
struct kvs_batches {
  template <class Log>
  using logged = logged_strategy<Log>;
  using ndp = ndp_strategy;
  using cap_mm = cap_strategy<cap_mm_target>;
  using cap_fs = cap_strategy<cap_fs_target>;
  using cpu = cpu_strategy;

  static config sized(const mode_context& ctx, bool mixed) {
    config c{
        mixed ? "kvs_mixed" : "kvs_set", 0, 0, 0, mixed ? 5u : 100u, mixed ? 0.99 : 0.0, mixed};
    if (ctx.options.quick) {
      c.universe = 4096, c.ops_per_batch = 2048, c.batches = mixed ? 4 : 2;
    } else if (ctx.device.emulated) {
      c.universe = 1 << 16, c.ops_per_batch = 1 << 14, c.batches = mixed ? 8 : 4;
    } else {  // the paper: 16M keys, 2M operations a batch, 25 SET / 100 mixed batches. Every
              // batch is alike, so the batch count only lengthens a run: 5 keep each of the nine
              // modes' repeats to seconds (docs/workloads/kvs.md).
      c.universe = 16ull << 20, c.ops_per_batch = 2ull << 20, c.batches = 5;
    }
    // --bytes sizes the table (64 bytes of table per key of the universe).
    if (ctx.options.bytes) c.universe = std::max<std::uint64_t>(*ctx.options.bytes / 64, 1024);
    return c;
  }

  template <class Strategy>
  static measurement run(const mode_context& ctx, const config& c, const std::string& mode,
                         Strategy& strategy) {
    const op_stream ops = stream_of(c);
    reference ref(c.universe);
    if (c.preload) {
      strategy.preload(c.universe);
      ref.preload(0);
    }
    const batch_counters before = strategy.counters();  // the preload is not measured
    const std::uint64_t persisted_before = strategy.bytes_persisted(before);
    std::uint64_t next = 1;  // batch numbers go on across repeats: values stay distinct
    measurement m;
    m.times_s = ctx.repeat([&](int) {
      const std::uint64_t first = next;
      const double t = seconds_on_host([&] {
        for (std::uint64_t b = first; b < first + c.batches; ++b) {
          strategy.batch(ops, b, c.ops_per_batch);
        }
      });
      for (std::uint64_t b = first; b < first + c.batches; ++b) ref.apply(ops, b, c.ops_per_batch);
      next += c.batches;
      return t;
    });
    const batch_counters after = strategy.counters();
    const std::string what = c.workload + "/" + mode;
    check_no_log_failures(what, after.log_failures);
    if (after.bad_gets != 0) {
      check_failed(what + ": " + std::to_string(after.bad_gets) +
                   " GETs returned a value their key was never given");
    }
    check_replay(what, "after the timed batches",
                 ref.compare(strategy.durable_view(), after.evictions));

    const std::uint64_t sets = after.sets - before.sets;
    m.sizes = {{"keys", c.universe},
               {"ops_per_batch", c.ops_per_batch},
               {"batches", c.batches},
               {"set_percent", c.set_percent},
               {"table_bytes", table_bytes(c)}};
    m.throughput = mega_operations(c.batches * c.ops_per_batch);
    // Per repeat: what the mode made durable, and per byte of key-value pairs that SETs changed.
    const std::uint64_t persisted = strategy.bytes_persisted(after) - persisted_before;
    m.bytes_persisted = persisted / calls_of(ctx);
    const double useful = static_cast<double>(sets) * sizeof(slot);
    m.metrics = {{"evictions", static_cast<double>(after.evictions)},
                 {"get_misses", static_cast<double>(after.get_misses)},
                 {"write_amplification", useful > 0 ? static_cast<double>(persisted) / useful : 0}};
    // Recovery undoes the interrupted batch: the table is as the replay says, without it.
    measure_restore(
        m, strategy, c.batches, what,
        [&] { return ref.compare(strategy.durable_view(), strategy.counters().evictions); }, ops,
        next, c.ops_per_batch);
    return m;
  }
};

workload kvs_workload(bool mixed) {
  workload w{mixed ? "kvs_mixed" : "kvs_set",
             mixed ? "gpKVS: batches of 95% GET / 5% SET, Zipf 0.99 keys, table preloaded; "
                     "failure-atomic batches (GPM Figures 9-11, Tables 4-5)"
                   : "gpKVS: batches of SETs, uniform keys, table starting empty; failure-atomic "
                     "batches (GPM Figures 9-11, Tables 4-5)",
             {}};
  w.modes = batch_modes<kvs_batches>::all(
      mixed, true,
      {"undo log on HCL, persisted in the kernel", "undo log on a conventional partitioned log",
       "GPU logs the home buckets ahead and updates in place; CPU writes back",
       "table in GPU memory, copied whole into one of two pool copies",
       "table in GPU memory, written whole into one of two files + fsync",
       "CPU threads, per-thread undo logs written back before each change"});
  return w;
}

}  // namespace
}  // namespace kvs

workload kvs_set_workload() { return kvs::kvs_workload(false); }
workload kvs_mixed_workload() { return kvs::kvs_workload(true); }

}  // namespace gpmbench
