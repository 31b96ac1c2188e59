// gpmbench workloads `db_insert` and `db_update`: gpDB (GPM, ASPLOS'22 §6, Figures 9-11, Tables 4
// and 5) on the table of db_table.cuh, every batch failure-atomic:
//   db_insert  batches of appended rows of 6 columns; only the row count is logged (conventional
//              log), the rows past the count being invisible until it moves
//   db_update  batches that update one column of the ~5% of rows a predicate selects; each old
//              cell undo-logged (HCL in gpm, a conventional partitioned log in gpm-conv)
// Modes as in docs/workloads/db.md: gpm, gpm-conv (db_update only: an INSERT logs one entry),
// gpm-ndp, cap-mm, cap-fs, cap-fs-disk, snapshot, cpu. Every mode's durable table is compared
// cell by cell with the host's replay after timing; gpm and gpm-conv also time the recovery of an
// UPDATE batch interrupted just before its commit (restore_s, restore_pct_of_op).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
#include "workloads/db/db_table.cuh"

namespace gpmbench {

namespace db {
namespace {

struct config {
  std::string workload;
  bool update;
  std::uint64_t rows;  // db_update: the table's rows; db_insert: rows inserted in all
  std::uint64_t batches;
  std::uint64_t rows_per_batch;  // db_insert
};

// Selected rows a thread may log in one UPDATE: 3x the expected share, plus slack (a thread that
// needs more reports a full log and the mode fails).
std::uint64_t entries_per_thread(std::uint64_t rows, std::uint64_t threads) {
  const std::uint64_t share = (rows + threads - 1) / threads;
  return share * kUpdatePercent * 3 / 100 + 16;
}

struct gpu_part {
  explicit gpu_part(const mode_context& ctx) : g(filling_geometry(ctx)), counts(2) { reset(); }
  std::uint64_t threads() const { return std::uint64_t{g.blocks} * g.threads; }
  void reset() { gpm::check_cuda(cudaMemset(counts.data(), 0, counts.bytes()), "cudaMemset"); }
  // [0] cells updated, [1] log failures, over the mode's life.
  std::vector<unsigned long long> read() const {
    std::vector<unsigned long long> h(2);
    counts.copy_to_host(h.data(), 2);
    return h;
  }
  template <bool Persist>
  void insert(const table_view& t, std::uint64_t first, std::uint64_t n) {
    gpm::launch(insert_rows<Persist>, g.blocks, g.threads, 0, s, t, first, n);
  }
  template <class Undo>
  void publish(const table_view& t, const Undo& undo, std::uint64_t rows) {
    gpm::launch(publish_rows<Undo>, 1, 1, 0, s, t, undo, rows, counts.data() + 1);
    s.synchronize();
  }
  template <class Undo>
  void update(const table_view& t, const Undo& undo, std::uint64_t batch) {
    gpm::launch(update_rows<Undo>, g.blocks, g.threads, 0, s, t, undo, batch, counts.data());
    s.synchronize();
  }
  geometry g;
  gpm::stream s;
  gpm::device_buffer<unsigned long long> counts;
};

void store_durably(std::uint64_t* word, std::uint64_t value) {
  *word = value;
  gpm::write_back(word, sizeof *word);
}

// ---- gpm, gpm-conv, snapshot -------------------------------------------------------------------

// The row count's log of INSERTs: one partition, a few entries.
constexpr gpm::conv_partitions kMetaShape{1, 4096};

// Log is the UPDATEs' undo transaction's: hcl_log (gpm, snapshot) or conv_log (gpm-conv).
template <class Log>
class logged_strategy {
 public:
  logged_strategy(const mode_context& ctx, const config& c, const std::string& mode, bool snapshot)
      : gpu_(ctx),
        per_thread_(entries_per_thread(c.rows, gpu_.threads()) * kCellEntryBytes),
        pool_(
            ctx, c.workload + "-" + mode,
            batch_pool_bytes(table::object_bytes(c.rows) + undo_type::object_bytes(undo_shape_()) +
                             gpm::conv_undo_tx::object_bytes(kMetaShape)),
            bench_pool::kNoObject, 6),
        table_(table::create(pool_.pool(), "db", c.rows)),
        undo_(undo_type::create(pool_.pool(), "db.undo", undo_shape_())),
        meta_(gpm::conv_undo_tx::create(pool_.pool(), "db.meta", kMetaShape)),
        snapshot_(snapshot) {}

  void truncate() { table_.set_rows(0); }
  void insert_batch(std::uint64_t first, std::uint64_t n) {
    meta_.begin();
    gpu_.insert<true>(table_.device(), first, n);
    gpu_.publish(table_.device(), undo_of(meta_), first + n);
    meta_.commit();
    bytes_ += n * kColumns * 8 + gpm::conv_undo_tx::entry_footprint(8) + 8;
    after_batch();
  }
  void update_batch(std::uint64_t b) {
    undo_.begin();
    const auto before = gpu_.read()[0];
    gpu_.update(table_.device(), undo_of(undo_), b);
    undo_.commit();
    bytes_ += (gpu_.read()[0] - before) * (8 + kCellEntryBytes);
    after_batch();
  }
  double restore_seconds(std::uint64_t b) {
    undo_.begin();
    gpu_.update(table_.device(), undo_of(undo_), b);
    // The crash comes after the batch's work: none of it, on any stream, is left to recovery.
    gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before recovery");
    return seconds_on_host([&] {
      if (!undo_.recover()) check_failed("db: recovery found no batch to undo");
    });
  }
  const gpm::undo_recovery& last_recovery() const { return undo_.last_recovery(); }
  std::uint64_t log_failures() const { return gpu_.read()[1]; }
  std::uint64_t bytes_persisted() const { return bytes_; }
  table_view durable_view() { return table_.host(); }

 private:
  using undo_type = gpm::basic_undo_tx<Log>;
  // An undo entry: a cell's 8 old bytes, with the transaction's record and the log's trailer.
  static constexpr std::uint64_t kCellEntryBytes = undo_type::entry_footprint(8);

  typename undo_type::shape_type undo_shape_() const {
    return undo_shape(static_cast<Log*>(nullptr), gpu_.g.blocks, gpu_.g.threads, per_thread_);
  }
  void after_batch() {
    if (snapshot_) bytes_ += pool_.pool().snapshot().bytes_written;
  }
  gpu_part gpu_;
  std::uint64_t per_thread_;
  bench_pool pool_;
  table table_;
  undo_type undo_;
  gpm::conv_undo_tx meta_;
  bool snapshot_;
  std::uint64_t bytes_ = 0;
};

// ---- gpm-ndp -----------------------------------------------------------------------------------

class ndp_strategy {
 public:
  ndp_strategy(const mode_context& ctx, const config& c)
      : gpu_(ctx),
        capacity_(entries_per_thread(c.rows, 1)),
        pool_(ctx, c.workload + "-gpm-ndp",
              batch_pool_bytes(table::object_bytes(c.rows) + capacity_ * 24 + 4096),
              bench_pool::kNoObject),
        table_(table::create(pool_.pool(), "db", c.rows)),
        log_(pool_.pool(), "db.undo", capacity_, 8) {}

  void truncate() { table_.set_rows(0); }
  void insert_batch(std::uint64_t first, std::uint64_t n) {
    gpu_.insert<false>(table_.device(), first, n);
    gpu_.s.synchronize();
    const table_view h = table_.host();
    for (unsigned c = 0; c < kColumns; ++c) log_.persister().persist(h.cell(c, first), n * 8);
    store_durably(h.rows, first + n);  // one 8-byte store: the INSERT's commit
    bytes_ += 8;
  }
  // The log names the cells the UPDATE selects.
  void update_batch(std::uint64_t b) {
    const std::uint64_t n = log_.log(
        gpu_.s, [&](unsigned char* entries, std::uint64_t entry_bytes, unsigned long long* used) {
          gpm::launch(log_selected_cells, gpu_.g.blocks, gpu_.g.threads, 0, gpu_.s, table_.device(),
                      pool_.pool().ref(), entries, entry_bytes, b, used);
        });
    gpu_.update(table_.device(), no_undo{}, b);
    bytes_ += log_.write_back_and_commit(n);
  }
  std::uint64_t log_failures() const { return 0; }
  std::uint64_t bytes_persisted() const { return log_.bytes_persisted() + bytes_; }
  table_view durable_view() { return table_.host(); }

 private:
  gpu_part gpu_;
  std::uint64_t capacity_;
  bench_pool pool_;
  table table_;
  ndp_log_ahead log_;
  std::uint64_t bytes_ = 0;
};

// ---- cap-mm, cap-fs, cap-fs-disk ---------------------------------------------------------------

// The table in GPU memory: the row count's line, then the columns (the pool object's layout
// without its header), so one range copies it whole.
class gpu_table {
 public:
  explicit gpu_table(std::uint64_t capacity)
      : capacity_(capacity), data_(table::object_bytes(capacity) - kObjectHeaderBytes) {
    gpm::check_cuda(cudaMemset(data_.data(), 0, data_.bytes()), "cudaMemset");
  }
  table_view view() const { return view_of(data_.data()); }
  table_view view_of(unsigned char* base) const {
    return {reinterpret_cast<std::uint64_t*>(base + table::kCountBytes),
            reinterpret_cast<std::uint64_t*>(base), capacity_};
  }
  const unsigned char* data() const { return data_.data(); }
  std::uint64_t bytes() const { return data_.bytes(); }

 private:
  std::uint64_t capacity_;
  gpm::device_buffer<unsigned char> data_;
};

// INSERT under CAP: the new rows are copied column by column past the durable count, then the
// count moves (one durable 8-byte store or write); an UPDATE copies the whole table into the
// inactive of two copies (cap_copies.hpp).
class cap_mm_strategy {
 public:
  cap_mm_strategy(const mode_context& ctx, const config& c)
      : gpu_(ctx), table_(c.rows), update_(c.update) {
    if (update_) {
      copies_.emplace(ctx, c.workload + "-cap-mm", table_.bytes());
    } else {
      pool_.emplace(ctx, c.workload + "-cap-mm", batch_pool_bytes(table::object_bytes(c.rows)),
                    bench_pool::kNoObject);
      durable_.emplace(table::create(pool_->pool(), "db", c.rows));
      cap_.emplace(team_, c.rows_per_batch * 8);
    }
  }
  void truncate() {
    if (durable_) durable_->set_rows(0);
    gpm::check_cuda(cudaMemset(table_.view().rows, 0, 8), "cudaMemset");
  }
  void load(std::uint64_t rows) {  // db_update's table, made durable before timing
    gpu_.insert<false>(table_.view(), 0, rows);
    gpu_.publish(table_.view(), no_undo{}, rows);
    copies_->save(table_.data(), gpu_.s);
  }
  void insert_batch(std::uint64_t first, std::uint64_t n) {
    gpu_.insert<false>(table_.view(), first, n);
    const table_view g = table_.view(), h = durable_->host();
    for (unsigned c = 0; c < kColumns; ++c)
      cap_->persist(h.cell(c, first), g.cell(c, first), n * 8, gpu_.s);
    store_durably(h.rows, first + n);
  }
  void update_batch(std::uint64_t b) {
    gpu_.update(table_.view(), no_undo{}, b);
    copies_->save(table_.data(), gpu_.s);
  }
  std::uint64_t log_failures() const { return 0; }
  std::uint64_t bytes_persisted() const {
    return copies_ ? copies_->bytes_persisted() : cap_->bytes_persisted();
  }
  table_view durable_view() {
    if (durable_) return durable_->host();
    return table_.view_of(const_cast<unsigned char*>(copies_->current()));
  }

 private:
  gpu_part gpu_;
  gpu_table table_;
  bool update_;
  cpu_team team_;
  std::optional<cap_mm_copies> copies_;
  std::optional<bench_pool> pool_;
  std::optional<table> durable_;
  std::optional<cap_mm> cap_;
};

class cap_fs_strategy {
 public:
  // On disk (power-loss durable) or in the pool's directory (tmpfs).
  cap_fs_strategy(const mode_context& ctx, const config& c, bool on_disk)
      : gpu_(ctx), table_(c.rows), dir_(on_disk ? ctx.disk_dir : ctx.pm_dir) {
    if (on_disk) note_if_in_memory(dir_);
    if (c.update) {
      copies_.emplace(dir_, "db", table_.bytes());
    } else {
      file_.emplace(dir_ + "/db.table", c.rows_per_batch * 8);
    }
  }
  void truncate() {
    gpm::check_cuda(cudaMemset(table_.view().rows, 0, 8), "cudaMemset");
    if (file_) {
      file_->write(0, table_.data(), 8, gpu_.s);
      file_->sync();
    }
  }
  void load(std::uint64_t rows) {
    gpu_.insert<false>(table_.view(), 0, rows);
    gpu_.publish(table_.view(), no_undo{}, rows);
    copies_->save(table_.data(), gpu_.s);
  }
  void insert_batch(std::uint64_t first, std::uint64_t n) {
    const table_view g = table_.view();
    gpu_.insert<false>(g, first, n);
    for (unsigned c = 0; c < kColumns; ++c) {
      file_->write(offset_of(g.cell(c, first)), g.cell(c, first), n * 8, gpu_.s);
    }
    file_->sync();  // the rows are durable before the count names them
    gpu_.publish(g, no_undo{}, first + n);
    file_->write(0, g.rows, 8, gpu_.s);
    file_->sync();
  }
  void update_batch(std::uint64_t b) {
    gpu_.update(table_.view(), no_undo{}, b);
    copies_->save(table_.data(), gpu_.s);
  }
  std::uint64_t log_failures() const { return 0; }
  std::uint64_t bytes_persisted() const {
    return copies_ ? copies_->bytes_persisted() : file_->bytes_persisted();
  }
  table_view durable_view() {
    if (copies_) {
      readback_ = copies_->read_current();
    } else {
      readback_.assign(table_.bytes(), 0);
      std::ifstream in(file_->path(), std::ios::binary);
      in.read(reinterpret_cast<char*>(readback_.data()),
              static_cast<std::streamsize>(readback_.size()));
      if (!in) check_failed("db: cannot read back " + file_->path());
    }
    return table_.view_of(readback_.data());
  }

 private:
  std::uint64_t offset_of(const std::uint64_t* p) const {
    return static_cast<std::uint64_t>(reinterpret_cast<const unsigned char*>(p) - table_.data());
  }
  gpu_part gpu_;
  gpu_table table_;
  std::string dir_;
  std::optional<cap_fs_copies> copies_;
  std::optional<cap_fs> file_;
  std::vector<unsigned char> readback_;
};

// ---- cpu ---------------------------------------------------------------------------------------

class cpu_strategy {
 public:
  cpu_strategy(const mode_context& ctx, const config& c)
      : capacity_(entries_per_thread(c.rows, team_.size())),
        pool_(ctx, c.workload + "-cpu",
              batch_pool_bytes(table::object_bytes(c.rows) + team_.size() * capacity_ * 24 + 4096),
              bench_pool::kNoObject),
        table_(table::create(pool_.pool(), "db", c.rows)),
        undo_(flat_undo::create(pool_.pool(), "db.undo", team_.size(), capacity_, 8)) {}

  void truncate() { table_.set_rows(0); }
  void load(std::uint64_t rows) {
    insert_batch(0, rows);
    bytes_ = 0;
  }
  void insert_batch(std::uint64_t first, std::uint64_t n) {
    const table_view h = table_.host();
    team_.parallel_for(n, [&](std::uint64_t begin, std::uint64_t end) {
      for (unsigned c = 0; c < kColumns; ++c) {
        for (std::uint64_t i = first + begin; i < first + end; ++i)
          *h.cell(c, i) = inserted_cell(i, c);
        gpm::write_back(h.cell(c, first + begin), (end - begin) * 8);
      }
    });
    store_durably(h.rows, first + n);  // after the rows: the INSERT's commit
    bytes_ += n * kColumns * 8 + 8;
  }
  void update_batch(std::uint64_t b) {
    const table_view h = table_.host();
    const std::uint64_t rows = *h.rows;
    const std::uint32_t regions = undo_.regions();
    std::vector<std::uint64_t> bytes(regions, 0);
    undo_.begin();
    // One region per piece of the rows, whatever way the team splits its loop.
    team_.parallel_for(regions, [&](std::uint64_t r_begin, std::uint64_t r_end) {
      for (std::uint64_t r = r_begin; r < r_end; ++r) {
        for (std::uint64_t row = r * rows / regions; row < (r + 1) * rows / regions; ++row) {
          if (!selected(*h.cell(kKeyColumn, row), b)) continue;
          std::uint64_t* cell = h.cell(kUpdateColumn, row);
          bytes[r] += undo_.save(static_cast<std::uint32_t>(r), cell, 8);
          *cell = updated_cell(*cell, b);
          gpm::write_back(cell, 8);
          bytes[r] += 8;
        }
      }
    });
    undo_.commit();
    for (const std::uint64_t x : bytes) bytes_ += x;
  }
  std::uint64_t log_failures() const { return 0; }
  std::uint64_t bytes_persisted() const { return bytes_; }
  table_view durable_view() { return table_.host(); }

 private:
  cpu_team team_;
  std::uint64_t capacity_;
  bench_pool pool_;
  table table_;
  flat_undo undo_;
  std::uint64_t bytes_ = 0;
};

// ---- the modes ---------------------------------------------------------------------------------

// gpDB for batch_modes (batch_modes.hpp): its sizes, one mode's run, and its strategies.
struct db_batches {
  template <class Log>
  using logged = logged_strategy<Log>;
  using ndp = ndp_strategy;
  using cap_mm = cap_mm_strategy;
  using cap_fs = cap_fs_strategy;
  using cpu = cpu_strategy;

  static config sized(const mode_context& ctx, bool update) {
    config c{update ? "db_update" : "db_insert", update, 0, 0, 0};
    if (ctx.options.quick) {
      c.rows = 16 << 10, c.batches = 2;
    } else if (ctx.device.emulated) {
      c.rows = 256 << 10, c.batches = 8;
    } else {  // the paper's 50M rows of 6 columns
      c.rows = 50ull << 20, c.batches = 10;
    }
    if (ctx.options.bytes) c.rows = std::max<std::uint64_t>(*ctx.options.bytes / 48, 1024);
    c.rows_per_batch = (c.rows + c.batches - 1) / c.batches;
    c.rows = c.rows_per_batch * c.batches;
    return c;
  }

  template <class Strategy>
  static measurement run(const mode_context& ctx, const config& c, const std::string& mode,
                         Strategy& s) {
    const std::string what = c.workload + "/" + mode;
    if (c.update) load_table(s, c);
    const std::uint64_t persisted_before = s.bytes_persisted();
    std::uint64_t next = 1;  // UPDATE batch numbers go on across repeats
    measurement m;
    m.times_s = ctx.repeat([&](int) {
      if (!c.update) s.truncate();  // each repeat inserts into an empty table
      const std::uint64_t first = next;
      const double t = seconds_on_host([&] {
        for (std::uint64_t b = 0; b < c.batches; ++b) {
          if (c.update) {
            s.update_batch(first + b);
          } else {
            s.insert_batch(b * c.rows_per_batch, c.rows_per_batch);
          }
        }
      });
      if (c.update) next += c.batches;
      return t;
    });
    check_no_log_failures(what, s.log_failures());
    const std::uint64_t last = c.update ? next - 1 : 0;
    const auto diff = [&] { return compare_with_replay(s.durable_view(), c.rows, 1, last); };
    check_replay(what, "after the timed batches", diff());
    const std::uint64_t calls = calls_of(ctx);
    const std::uint64_t persisted = s.bytes_persisted() - persisted_before;
    // Bytes the batches changed: the rows inserted, or the cells updated (kUpdatePercent of the
    // rows per batch, in expectation).
    const double changed =
        c.update ? static_cast<double>(calls * c.batches * c.rows) * 8 * kUpdatePercent / 100
                 : static_cast<double>(calls * c.rows * kColumns * 8);
    m.sizes = {{"rows", c.rows},
               {"columns", kColumns},
               {"batches", c.batches},
               {"table_bytes", table::object_bytes(c.rows)}};
    if (!c.update) m.sizes.push_back({"rows_per_batch", c.rows_per_batch});
    m.throughput = c.update ? mega_operations(c.rows * c.batches)  // rows scanned
                            : mega_operations(c.rows);             // rows inserted
    m.bytes_persisted = persisted / calls;
    m.metrics = {{"write_amplification", static_cast<double>(persisted) / changed}};
    // UPDATEs recover in place; the table is then the replay without the interrupted batch.
    if (c.update) measure_restore(m, s, c.batches, what, diff, next);
    return m;
  }

 private:
  template <class S>
  static void load_table(S& s, const config& c) {
    if constexpr (requires { s.load(c.rows); }) {
      s.load(c.rows);
    } else {  // the pool modes load as they insert, outside the timing
      s.insert_batch(0, c.rows);
    }
  }
};

workload db_workload(bool update) {
  workload w{update ? "db_update" : "db_insert",
             update ? "gpDB: UPDATE one column of the 5% of rows a predicate selects, old cells "
                      "undo-logged; failure-atomic batches (GPM Figures 9-11, Tables 4-5)"
                    : "gpDB: INSERT batches of 6-column rows, the row count logged; "
                      "failure-atomic batches (GPM Figures 9-11, Table 4)",
             {}};
  const std::string log = update ? "old cells undo-logged on HCL" : "row count logged";
  // gpm-conv runs for UPDATEs only: an INSERT already logs its one entry on a conventional log.
  w.modes = batch_modes<db_batches>::all(
      update, update,
      {"GPU stores persisted in the kernel; " + log,
       "old cells undo-logged on a conventional partitioned log",
       "GPU stores without persisting; CPU threads write back (log first)",
       update ? "table in GPU memory, copied whole into one of two pool copies"
              : "rows in GPU memory, copied into the pool, then the count",
       "as cap-mm into files in the pool directory, with fsync",
       "CPU threads; the same logging, written back by the CPU"});
  return w;
}

}  // namespace
}  // namespace db

workload db_insert_workload() { return db::db_workload(false); }
workload db_update_workload() { return db::db_workload(true); }

}  // namespace gpmbench
