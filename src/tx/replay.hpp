// Replaying a heap's redo records with kernels (replay.cu): what tx_heap::sync() and recovery
// use to bring the home image up to date, where the host's reproducer (media.hpp) applies one
// record after another in a merge of the logs. The kernels find every log's units from its
// cursor, place each record by its sequence number in a window, take the prefix up to the first
// gap, and write each word's newest value of that prefix into the home image, all in parallel;
// the host then flips the root and frees the log space as after a pass of its own
// (reproducer::advance). Host code includes this header; the kernels live in replay.cu.
#pragma once

#include <cstdint>
#include <vector>

#include <gpm/platform/runtime.hpp>
#include <gpm/tx/detail/format.hpp>

namespace gpm::detail::tx {

struct log_state;  // engine.cuh: per log, in GPU memory, `next` its tail

// A record placed in the window by its sequence number: where it lies, and the end of its unit
// (the stream position after it) when it is its unit's last record, else 0.
struct replay_slot {
  std::uint64_t pos;
  std::uint64_t unit_end;
  std::uint32_t log;  // kNoLog: no record of this sequence number was found
  std::uint32_t width;
};
inline constexpr std::uint32_t kNoLog = ~0u;

class gpu_replay {
 public:
  // `logs` and `home`: the heap's logs and home image as kernels address them (its pool mapped
  // into the GPU). reserve() takes the GPU memory: a window of slots (at most `window`, fewer
  // where the logs cannot hold as many records: the most sequence numbers one run() covers), a
  // 32-bit claim per heap word and, where it fits, a copy of the logs.
  gpu_replay(const heap_layout& layout, std::uint64_t window, std::uint64_t salt,
             const std::uint64_t* logs, std::uint32_t* home);

  // Takes the GPU memory run() needs unless it has it, at most a quarter of what is free (the
  // copy of the logs only if it fits too): false when the claims and the window do not fit
  // (then the heap applies on the host).
  bool reserve();

  struct result {
    std::uint64_t records = 0;            // applied: sequence numbers applied + 1 .. + records
    std::vector<std::uint64_t> positions;  // per log: the stream position after what was applied
  };
  // Applies the records of `epoch` that continue the prefix after `applied`, reading each log
  // from `positions[log]` (units there at or below `applied` are passed over) up to its tail in
  // `tails` (the heap's log states; null: anywhere in the log, as at recovery), at most a
  // window, and persists the home words written at the persist site `site` (a string literal:
  // kernels on the emulator name it to the crash-image checker). Waits for its kernels. After
  // reserve() returned true; a run that throws gives the memory back (reserve() again).
  result run(std::uint64_t applied, std::uint64_t epoch, const std::vector<std::uint64_t>& positions,
             const log_state* tails, const char* site);

 private:
  result run_kernels(std::uint64_t applied, std::uint64_t epoch,
                     const std::vector<std::uint64_t>& positions, const log_state* tails,
                     const char* site);

  heap_layout layout_;
  std::uint64_t salt_;
  const std::uint64_t* logs_;
  std::uint32_t* home_;
  std::uint64_t window_;
  stream stream_;
  device_buffer<replay_slot> slots_;
  device_buffer<std::uint32_t> claims_;     // per word: the newest slot + 1 that writes it
  device_buffer<std::uint64_t> positions_;  // per log
  // [0]: records placed in the window, [1]: the prefix, [2]: slots filled, [3]: the highest slot
  // placed + 1, [4]: 1 where a log's numbers fall
  device_buffer<std::uint64_t> counts_;
  device_buffer<std::uint64_t> mirror_;     // the logs' slots as the kernels read them; empty:
                                            // no room, the kernels read the pool
};

}  // namespace gpm::detail::tx
