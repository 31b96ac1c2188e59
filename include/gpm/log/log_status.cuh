// gpm::log_status: the per-operation result of every device-side log operation (hcl_log,
// conv_log, undo_tx). Device code never fails silently and never overwrites its inputs to report
// an error: each call returns one of these, and every status other than `ok` and `empty` is also
// recorded in the log's fault record, which the host turns into a gpm::error (check_faults()).
#pragma once

#include <cstdint>
#include <string_view>

#include <gpm/platform/macros.hpp>

namespace gpm {

enum class log_status : std::uint32_t {
  ok = 0,
  empty,           // read/remove: the thread's (or partition's) log holds no entry
  full,            // insert: the entry does not fit in the space left to this thread or partition
  size_mismatch,   // read/remove: the newest entry has another size than the one asked for
  corrupt,         // read/remove: the newest entry failed its checksum (media corruption)
  wrong_geometry,  // hcl_log: the kernel's grid or block differs from the log's recorded geometry
  bad_partition,   // conv_log: the partition index is out of range
  bad_address,     // undo_tx: the range to log is not inside the pool
};

inline constexpr int log_status_count = 8;

GPM_HOST_DEVICE constexpr std::uint32_t log_status_bit(log_status s) {
  return 1u << static_cast<std::uint32_t>(s);
}

// A stable, lower-case name ("wrong_geometry", ...), for messages and JSON.
std::string_view to_string(log_status s) noexcept;

}  // namespace gpm
