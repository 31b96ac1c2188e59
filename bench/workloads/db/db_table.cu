// The gpDB table's host side (db_table.cuh): creating and validating its pool object, and the
// host replay that every mode's table is checked against.
#include "workloads/db/db_table.cuh"

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include <gpm/platform/error.hpp>

namespace gpmbench::db {

table table::create(gpm::pool& p, std::string_view name, std::uint64_t capacity) {
  if (capacity == 0) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "db::table::create: a table needs room for at least one row");
  }
  const std::uint64_t offset =
      create_with_header(p, name, object_bytes(capacity) - kObjectHeaderBytes, kTableKind,
                         {capacity, kColumns, 0});
  return table(p, offset, capacity);  // zero-filled by the pool: no rows
}

table table::open(gpm::pool& p, std::string_view name) {
  std::uint64_t offset = 0;
  const object_header h = open_with_header(
      p, name, kTableKind, offset,
      [](const std::uint64_t(&s)[3]) { return object_bytes(s[0]) - kObjectHeaderBytes; });
  const table t(p, offset, h.sizes[0]);
  if (h.sizes[0] == 0 || h.sizes[1] != kColumns || t.rows() > h.sizes[0]) {
    gpm::throw_error(gpm::errc::corrupt,
                     "pool object '" + std::string(name) + "': the gpDB table names " +
                         std::to_string(h.sizes[1]) + " columns, room for " +
                         std::to_string(h.sizes[0]) + " rows and " + std::to_string(t.rows()) +
                         " rows; this build needs 6 columns and rows within the room; "
                         "recreate it");
  }
  return t;
}

void table::set_rows(std::uint64_t rows) const {
  *host().rows = rows;
  gpm::write_back(host().rows, sizeof rows);
}

std::string compare_with_replay(const table_view& t, std::uint64_t rows, std::uint64_t first_batch,
                                std::uint64_t last_batch) {
  if (*t.rows != rows) {
    return "the table has " + std::to_string(*t.rows) + " rows, not " + std::to_string(rows);
  }
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::string first_problem;
  std::uint64_t first_row = ~0ull;
  std::mutex m;
  std::vector<std::thread> team;
  for (unsigned k = 0; k < threads; ++k) {
    team.emplace_back([&, k] {
      for (std::uint64_t r = k * rows / threads; r < (k + 1) * rows / threads; ++r) {
        for (unsigned c = 0; c < kColumns; ++c) {
          std::uint64_t expected = inserted_cell(r, c);
          if (c == kUpdateColumn) {
            const std::uint64_t key = inserted_cell(r, kKeyColumn);
            for (std::uint64_t b = first_batch; b <= last_batch && b >= first_batch; ++b) {
              if (selected(key, b)) expected = updated_cell(expected, b);
            }
          }
          if (*t.cell(c, r) == expected) continue;
          const std::lock_guard g(m);
          if (r < first_row) {
            first_row = r;
            first_problem = "row " + std::to_string(r) + " column " + std::to_string(c) +
                            " holds " + std::to_string(*t.cell(c, r)) + ", the replay says " +
                            std::to_string(expected);
          }
          return;
        }
      }
    });
  }
  for (std::thread& th : team) th.join();
  return first_problem;
}

}  // namespace gpmbench::db
