// gpm::tx_status and gpm::tx_result: what one persistent GPU transaction (gpm::tx_ref::run)
// reports back to the code that ran it, and gpm::tx_mode, how a heap makes commits durable.
// Device code never fails silently: every run() returns a status, and a transaction that did not
// commit wrote nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <gpm/platform/macros.hpp>

namespace gpm {

enum class tx_status : std::uint32_t {
  committed = 0,     // the writes are in the heap (and, unless the heap is volatile, logged)
  cancelled,         // the body called t.cancel(): nothing was written
  too_many_aborts,   // conflicts aborted it tx_options::max_attempts times: nothing was written
  read_set_full,     // it touched more ownership records than the read set holds
  write_set_full,    // it wrote more distinct words than the write set holds
  out_of_range,      // it accessed a word at or past heap.words()
  record_too_large,  // its redo record does not fit in the block's ring or log: enlarge them
  too_many_threads,  // the calling thread has no status slot (tx_options::max_threads)
};

inline constexpr int tx_status_count = 8;

// A stable, lower-case name ("write_set_full", ...), for messages and JSON.
std::string_view to_string(tx_status s) noexcept;

struct tx_result {
  tx_status status = tx_status::committed;
  // The commit's place in the heap's global order (1, 2, ...): replaying the committed
  // transactions' writes in this order gives the heap's state. 0 for a transaction that wrote
  // nothing, for a volatile heap, and for any status but committed.
  std::uint64_t seq = 0;
  std::uint32_t attempts = 0;  // attempts made, the final one included
};

// How a heap's commits become durable (docs/transactions.md, "Persistence modes").
enum class tx_mode : std::uint32_t {
  volatile_only,  // no log: the STM on the GPU's working copy alone (the benchmarks' ceiling)
  direct,         // the committing thread writes and persists its own redo record
  helpers,        // committers hand their record to a ring in shared memory; helper warps persist
  adaptive,       // direct or helpers, switched by the measured persist bandwidth (TPDS'20 §5)
  hcl,            // as direct, into records striped by lane so a warp's stores coalesce
  undo,           // GPM-style undo logging: old values logged, new ones stored in place
};

// The modes' names, as the benchmarks' records spell them: "volatile", "redo-direct",
// "helpers", "adaptive", "redo-hcl", "undo-hcl".
std::string_view to_string(tx_mode m) noexcept;
// The mode to_string names `name`, or nullopt for any other string.
std::optional<tx_mode> parse_tx_mode(std::string_view name) noexcept;

}  // namespace gpm
