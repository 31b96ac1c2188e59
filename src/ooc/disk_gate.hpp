// Admission of background I/O per disk, shared by every gpm::ooc mapping of the process: at most
// kBackgroundPerDisk read-ahead reads and write-behind writes run at once on one disk (a file
// system's st_dev). Each mapping reads ahead and writes behind on its own I/O threads; several
// input mappings streaming at once (vectorAdd's two, BlackScholes' five) would otherwise read their
// streams side by side, and on the lent H200 machine's virtual disk two readers of 8 MiB pieces
// read 1.12-1.15 GB/s together where one read 1.40-1.66 GB/s (docs/out-of-core.md). Misses' reads
// and the writes that make room for them do not pass through it. Host only; thread-safe. Must
// never hold a disk past the read or write it was entered for.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace gpm::detail::ooc {

inline constexpr std::uint32_t kBackgroundPerDisk = 1;

class disk_gate {
 public:
  // Takes one of `disk`'s places, waiting up to `patience` for one to free; false if none did.
  bool enter(std::uint64_t disk, std::chrono::microseconds patience);
  // Gives back a place enter() took.
  void leave(std::uint64_t disk);

  // The process's gate, which every mapping's read-ahead and write-behind pass.
  static disk_gate& background();

 private:
  std::mutex m_;
  std::condition_variable freed_;
  std::unordered_map<std::uint64_t, std::uint32_t> busy_;  // places taken, per disk
};

}  // namespace gpm::detail::ooc
