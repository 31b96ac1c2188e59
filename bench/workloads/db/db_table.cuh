// The gpDB table (GPM, ASPLOS'22 §6): a relational table of kColumns 8-byte columns in a
// gpm::pool, stored column by column (a column's cells are contiguous, so a kernel that writes
// rows or one column writes whole lines). The row count is the table's metadata: rows at or past
// it do not exist, so an INSERT writes its rows there first and makes them part of the table by
// updating the count, the one logged (conventional log) store of the batch. An UPDATE changes
// one column of the rows a predicate on another column selects, each old cell undo-logged (HCL)
// by the thread that owns the row. This header holds the on-media format, the host object, the
// value rules that tests and modes check against, and the kernels; it never stores a pointer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>
#include <gpm/pool/pool_ref.hpp>

#include "workloads/common/object_header.hpp"
#include "workloads/common/undo_logs.cuh"

namespace gpmbench::db {

inline constexpr unsigned kColumns = 6;
inline constexpr unsigned kKeyColumn = 0;     // the UPDATE's predicate reads it
inline constexpr unsigned kUpdateColumn = 3;  // the UPDATE writes it
inline constexpr std::uint32_t kUpdatePercent = 5;
inline constexpr gpm::format::object_kind kTableKind = bench_kind("gpDB table", "GMPGPDB1");

// What kernels take: the columns (in the pool, or GPU memory for the CAP baselines) and the
// row count's address.
struct table_view {
  std::uint64_t* cells;  // column c, row r at cells[c * capacity + r]
  std::uint64_t* rows;   // the row count
  std::uint64_t capacity;
  GPM_HOST_DEVICE std::uint64_t* cell(unsigned column, std::uint64_t row) const {
    return cells + column * capacity + row;
  }
};

// The pool object: object_header (sizes: capacity, columns), the row count on its own line, then
// the columns.
class table {
 public:
  static constexpr std::uint64_t kCountBytes = 128;
  static std::uint64_t object_bytes(std::uint64_t capacity) {
    return kObjectHeaderBytes + kCountBytes + capacity * kColumns * sizeof(std::uint64_t);
  }
  // Creates an empty table for `capacity` rows. Throws invalid_argument (zero capacity), and as
  // gpm::pool::allocate.
  static table create(gpm::pool& p, std::string_view name, std::uint64_t capacity);
  // Opens and validates (not_found, layout_mismatch, version, corrupt: checksum, sizes, or a row
  // count larger than the capacity).
  static table open(gpm::pool& p, std::string_view name);

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t cells_bytes() const { return capacity_ * kColumns * sizeof(std::uint64_t); }
  table_view device() const { return view(pool_->ref()); }
  table_view host() const { return view(pool_->host_ref()); }
  std::uint64_t rows() const { return *host().rows; }
  // Sets the row count durably from the host (truncation between repeats).
  void set_rows(std::uint64_t rows) const;

 private:
  table(gpm::pool& p, std::uint64_t offset, std::uint64_t capacity)
      : pool_(&p), offset_(offset), capacity_(capacity) {}
  table_view view(const gpm::pool_ref& r) const {
    return {r.ptr<std::uint64_t>(offset_ + kObjectHeaderBytes + kCountBytes),
            r.ptr<std::uint64_t>(offset_ + kObjectHeaderBytes), capacity_};
  }
  gpm::pool* pool_;
  std::uint64_t offset_;
  std::uint64_t capacity_;
};

// The cell an INSERT gives row r, column c: distinct per row and column, so a misplaced or torn
// cell is seen.
GPM_HOST_DEVICE inline std::uint64_t inserted_cell(std::uint64_t row, unsigned column) {
  return gpm::mix64(row * kColumns + column + 1);
}
// Whether UPDATE batch b selects the row whose key cell is `key` (about kUpdatePercent of rows).
GPM_HOST_DEVICE inline bool selected(std::uint64_t key, std::uint64_t batch) {
  return gpm::mix64(key ^ (batch * 0x9e3779b97f4a7c15ull)) % 100 < kUpdatePercent;
}
// The value UPDATE batch b stores over `old`.
GPM_HOST_DEVICE inline std::uint64_t updated_cell(std::uint64_t old, std::uint64_t batch) {
  return gpm::mix64(old + batch);
}

// INSERT, step 1: rows [first, first + count) get their cells, persisted by each thread when
// Persist (the pool modes); nothing else changes, so no undo is needed for them.
template <bool Persist>
__global__ void insert_rows(table_view t, std::uint64_t first, std::uint64_t count) {
  for (std::uint64_t i : gpm::grid_stride(count)) {
    for (unsigned c = 0; c < kColumns; ++c) *t.cell(c, first + i) = inserted_cell(first + i, c);
  }
  if constexpr (Persist) gpm::persist();
}

// INSERT, step 2 (one thread): the count, logged first through `undo` (the conventional log in
// the gpm modes), then updated and persisted.
template <class Undo>
__global__ void publish_rows(table_view t, Undo undo, std::uint64_t rows,
                             unsigned long long* failures) {
  if (!undo.save(t.rows, sizeof *t.rows)) {
    atomicAdd(failures, 1ull);
    return;
  }
  *t.rows = rows;
  if constexpr (Undo::persistent) gpm::persist(t.rows, sizeof *t.rows);
}

// UPDATE: each thread owns the rows of its grid-stride range (so a cell is logged by one thread)
// and updates the selected ones, logging each old cell first.
template <class Undo>
__global__ void update_rows(table_view t, Undo undo, std::uint64_t batch,
                            unsigned long long* counts /* [0] updated, [1] log failures */) {
  const std::uint64_t rows = *t.rows;
  unsigned long long updated = 0, failed = 0;
  for (std::uint64_t r : gpm::grid_stride(rows)) {
    if (!selected(*t.cell(kKeyColumn, r), batch)) continue;
    std::uint64_t* cell = t.cell(kUpdateColumn, r);
    if (!undo.save(cell, sizeof *cell)) {
      ++failed;
      continue;
    }
    *cell = updated_cell(*cell, batch);
    if constexpr (Undo::persistent) gpm::persist(cell, sizeof *cell);
    ++updated;
  }
  if (updated) atomicAdd(&counts[0], updated);
  if (failed) atomicAdd(&counts[1], failed);
}

// gpm-ndp's log ahead of an UPDATE: the pool offset and old value of every cell the batch will
// change go to consecutive flat_undo entries (counted in `used`), not persisted; the CPU writes
// them back before update_rows<no_undo> runs.
__global__ inline void log_selected_cells(table_view t, gpm::pool_ref pool, unsigned char* entries,
                                          std::uint64_t entry_bytes, std::uint64_t batch,
                                          unsigned long long* used) {
  const std::uint64_t rows = *t.rows;
  for (std::uint64_t r : gpm::grid_stride(rows)) {
    if (!selected(*t.cell(kKeyColumn, r), batch)) continue;
    const std::uint64_t* cell = t.cell(kUpdateColumn, r);
    auto* head =
        reinterpret_cast<flat_undo::entry_head*>(entries + atomicAdd(used, 1ull) * entry_bytes);
    *head = {pool.offset_of(cell), sizeof *cell};
    *reinterpret_cast<std::uint64_t*>(head + 1) = *cell;
  }
}

// The host's replay: the table after inserting `rows` rows and then running UPDATE batches
// [first_batch, last_batch] (none when last < first), checked cell by cell on all CPU cores.
// Returns "" or the first difference, in words.
std::string compare_with_replay(const table_view& t, std::uint64_t rows, std::uint64_t first_batch,
                                std::uint64_t last_batch);

}  // namespace gpmbench::db
