// The replay kernels (replay.hpp). A run, in one stream:
//   mirror  a warp per log copies the log's chunks from its cursor to its tail (the whole ring
//           at recovery, where no tail is known) into GPU memory, 32 lanes side by side, so that
//           the walk below reads GPU memory, not the pool across PCIe one slot at a time (a
//           chunk torn by a kernel still writing it fails its record's checksum there, as in
//           place); without GPU memory for the copy the kernels read the pool in place
//   place   one thread per log walks its units from the log's cursor, validating each as the
//           host's reproducer does (log_reader.hpp), and puts each record in the window's slot
//           seq - applied - 1; units at or below `applied` are passed over (the cursor moves),
//           the walk stops at the first unit missing or torn, or past the window (a group may
//           end there in part: the next run places the rest)
//   gap     the prefix ends at the lowest empty slot; it counts the slots filled. Where fewer
//           than the records placed (a number that units of two logs stand for), or where a log's
//           numbers did not rise (crafted or damaged logs only, each checksum valid), the window
//           is irregular: the run applies nothing and leaves it to the host's merge, whose rules
//           for them (reproducer.cpp) are the reference
//   claim   each record of the prefix claims its words: a word's claim is the highest slot that
//           writes it (atomic max), so the newest write of the prefix wins, as in order
//   write   each record stores the words it won into the home image (and clears their claims
//           for the next run), persisted with one fence per thread; the last record of each
//           unit moves its log's position past the unit
// A word written twice in one record (write sets hold each word once, so only a crafted record
// could) goes back as the record's later pair, as the host applies it: the record stores its
// pairs last to first, and only the first store that finds its claim clears it.
#include "replay.hpp"

#include <algorithm>

#include <gpm/platform/atomic.cuh>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/tx/detail/engine.cuh>
#include <gpm/tx/detail/log_reader.hpp>

namespace gpm::detail::tx {

namespace {

// Kernels read the logs as the host does, atomically: other kernels may still be writing them.
struct device_load {
  GPM_HOST_DEVICE std::uint64_t operator()(const std::uint64_t* slot) const {
    return atomic_ref<std::uint64_t, thread_scope::system>(*const_cast<std::uint64_t*>(slot))
        .load(memory_order_relaxed);
  }
};
using reader = log_reader<device_load>;

constexpr unsigned kThreads = 256;
constexpr std::size_t kCounts = 5;  // gpu_replay::counts_

__global__ void mirror(const std::uint64_t* logs, std::uint64_t* copy, std::uint64_t log_chunks,
                       std::uint32_t count, const std::uint64_t* positions, const log_state* tails) {
  const unsigned lane = threadIdx.x % 32;
  for (std::uint64_t log : grid_stride<32>(count)) {
    const std::uint64_t from = positions[log];
    std::uint64_t n = log_chunks;
    if (tails != nullptr) {
      const std::uint64_t to = atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(tails[log].next))
                                   .load(memory_order_relaxed);
      n = to > from ? (to - from < log_chunks ? to - from : log_chunks) : 0;
    }
    const std::uint64_t base = 2 * log_chunks * log;
    for (std::uint64_t j = lane; j < n; j += 32) {
      const std::uint64_t at = base + 2 * ((from + j) % log_chunks);
      copy[at] = device_load{}(&logs[at]);
      copy[at + 1] = device_load{}(&logs[at + 1]);
    }
  }
}

__global__ void place(reader r, std::uint64_t epoch, std::uint64_t applied, std::uint64_t window,
                      replay_slot* slots, std::uint64_t* positions, std::uint64_t* counts) {
  for (std::uint64_t log : grid_stride(r.layout.logs)) {
    const auto l = static_cast<std::uint32_t>(log);
    std::uint64_t pos = positions[l];
    std::uint64_t found = 0;
    std::uint64_t reach = 0;  // the highest slot placed + 1
    std::uint64_t after = 0;  // the last sequence number of the log's unit before
    bool first = true;
    log_unit u;
    // A log's sequence numbers rise (its reservations are ordered). A unit that does not
    // continue them (crafted or damaged logs only) makes the window irregular: the host's merge,
    // which takes each log's units in their order, applies it instead.
    while (r.read_unit(l, pos, epoch, applied, u) && u.seq <= applied + window) {
      if (!first && u.seq <= after) {
        atomic_ref<std::uint64_t>(counts[4]).store(1, memory_order_relaxed);
        break;
      }
      first = false;
      after = u.last();
      const std::uint64_t end = pos + u.chunks;
      const bool whole = u.last() <= applied + window;
      if (u.last() <= applied) positions[l] = end;  // applied before: passed over
      const std::uint64_t to = whole ? u.last() : applied + window;
      for (std::uint64_t s = u.seq > applied ? u.seq : applied + 1; s <= to; ++s) {
        const std::uint64_t i = s - u.seq;  // the member
        slots[s - applied - 1] = {pos + i, s == u.last() ? end : 0, l, u.width};
        ++found;
      }
      if (to > applied) reach = to - applied;
      if (!whole) break;
      pos = end;
    }
    if (found != 0) atomic_ref<std::uint64_t>(counts[0]).fetch_add(found, memory_order_relaxed);
    if (reach != 0) atomic_ref<std::uint64_t>(counts[3]).fetch_max(reach, memory_order_relaxed);
  }
}

// counts[1] starts at counts[3] (the highest slot placed + 1), so a window without a gap ends
// with its last record found; counts[2] gets the slots filled.
__global__ void gap(const replay_slot* slots, std::uint64_t* counts) {
  std::uint64_t filled = 0;
  for (std::uint64_t i : grid_stride(counts[3])) {
    if (slots[i].log == kNoLog) {
      atomic_ref<std::uint64_t>(counts[1]).fetch_min(i, memory_order_relaxed);
    } else {
      ++filled;
    }
  }
  if (filled != 0) atomic_ref<std::uint64_t>(counts[2]).fetch_add(filled, memory_order_relaxed);
}

// The records the run applies: the prefix, or none in an irregular window: where two logs' units
// stand for one number (fewer slots filled than records placed) or a log's numbers do not rise.
GPM_HOST_DEVICE std::uint64_t prefix_of(const std::uint64_t* counts) {
  return counts[2] == counts[0] && counts[4] == 0 ? counts[1] : 0;
}

__global__ void claim(reader r, const replay_slot* slots, const std::uint64_t* counts,
                      std::uint32_t* claims) {
  for (std::uint64_t i : grid_stride(prefix_of(counts))) {
    const replay_slot s = slots[i];
    const auto pairs = r.at(s.log, s.pos, s.width);
    const std::uint32_t count = count_of(pairs[0]);
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::uint64_t p = pairs[kFirstPair + k];
      atomic_ref<std::uint32_t>(claims[p & 0xffffffffu])
          .fetch_max(static_cast<std::uint32_t>(i + 1), memory_order_relaxed);
    }
  }
}

__global__ void write(reader r, const replay_slot* slots, const std::uint64_t* counts,
                      std::uint32_t* claims, std::uint32_t* home, std::uint64_t* positions,
                      const char* site) {
  for (std::uint64_t i : grid_stride(prefix_of(counts))) {
    const replay_slot s = slots[i];
    const auto pairs = r.at(s.log, s.pos, s.width);
    const std::uint32_t count = count_of(pairs[0]);
    for (std::uint32_t k = count; k-- > 0;) {
      const std::uint64_t p = pairs[kFirstPair + k];
      const std::uint64_t word = p & 0xffffffffu;
      const atomic_ref<std::uint32_t> c(claims[word]);
      if (c.load(memory_order_relaxed) != i + 1) continue;
      c.store(0, memory_order_relaxed);
      home[word] = static_cast<std::uint32_t>(p >> 32);
      persist_later_at(site, &home[word], sizeof(std::uint32_t));
    }
    if (s.unit_end != 0) {
      atomic_ref<std::uint64_t>(positions[s.log]).fetch_max(s.unit_end, memory_order_relaxed);
    }
  }
  persist_named_at(site);
}

unsigned blocks_for(std::uint64_t items) {
  return static_cast<unsigned>(std::clamp<std::uint64_t>((items + kThreads - 1) / kThreads, 1, 1024));
}

}  // namespace

gpu_replay::gpu_replay(const heap_layout& layout, std::uint64_t window, std::uint64_t salt,
                       const std::uint64_t* logs, std::uint32_t* home)
    : layout_(layout),
      salt_(salt),
      logs_(logs),
      home_(home),
      // A record takes at least 2 chunks: the logs never hold more than this many.
      window_(std::min<std::uint64_t>(window, layout.logs * layout.log_chunks / 2)),
      stream_(true) {}

bool gpu_replay::reserve() {
  if (slots_.size() != 0) return true;
  // The replay takes at most a quarter of the GPU memory free now: the rest is the program's.
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo (tx replay)");
  std::uint64_t budget = free_bytes / 4;
  const std::uint64_t needed = layout_.words * sizeof(std::uint32_t) +
                               window_ * sizeof(replay_slot) +
                               (std::uint64_t{layout_.logs} + kCounts) * sizeof(std::uint64_t);
  if (needed > budget) return false;
  budget -= needed;
  try {
    claims_ = device_buffer<std::uint32_t>(layout_.words);
    check_cuda(cudaMemsetAsync(claims_.data(), 0, claims_.bytes(), stream_),
               "cudaMemsetAsync (tx replay claims)");
    positions_ = device_buffer<std::uint64_t>(layout_.logs);
    counts_ = device_buffer<std::uint64_t>(kCounts);
    slots_ = device_buffer<replay_slot>(window_);  // last: its size says all are there
  } catch (const error& e) {
    if (e.code() != errc::cuda) throw;
    // No room in GPU memory (check_cuda cleared the error): the caller applies on the host.
    claims_ = device_buffer<std::uint32_t>();
    positions_ = device_buffer<std::uint64_t>();
    counts_ = device_buffer<std::uint64_t>();
    return false;
  }
  const std::uint64_t log_slots = 2 * std::uint64_t{layout_.logs} * layout_.log_chunks;
  if (log_slots * sizeof(std::uint64_t) <= budget) {
    try {
      mirror_ = device_buffer<std::uint64_t>(log_slots);
    } catch (const error& e) {
      if (e.code() != errc::cuda) throw;
    }
  }
  // Without room for a copy of the logs, the kernels read them in place.
  return true;
}

gpu_replay::result gpu_replay::run(std::uint64_t applied, std::uint64_t epoch,
                                   const std::vector<std::uint64_t>& positions,
                                   const log_state* tails, const char* site) {
  try {
    return run_kernels(applied, epoch, positions, tails, site);
  } catch (...) {
    // Claims a failed run left set would hide newer writes of their words from the next run's
    // records: the next run starts from fresh, zeroed memory.
    slots_ = device_buffer<replay_slot>();
    throw;
  }
}

gpu_replay::result gpu_replay::run_kernels(std::uint64_t applied, std::uint64_t epoch,
                                           const std::vector<std::uint64_t>& positions,
                                           const log_state* tails, const char* site) {
  const std::uint32_t logs = layout_.logs;
  require(slots_.size() != 0, "gpu_replay::run before reserve()");
  check_cuda(cudaMemsetAsync(slots_.data(), 0xff, slots_.bytes(), stream_),
             "cudaMemsetAsync (tx replay slots)");
  check_cuda(cudaMemsetAsync(counts_.data(), 0, counts_.bytes(), stream_),
             "cudaMemsetAsync (tx replay counts)");
  check_cuda(cudaMemcpyAsync(positions_.data(), positions.data(), logs * sizeof(std::uint64_t),
                             cudaMemcpyHostToDevice, stream_),
             "cudaMemcpyAsync (tx replay positions)");
  const reader r{mirror_.size() != 0 ? mirror_.data() : logs_, layout_, salt_};
  if (mirror_.size() != 0) {
    launch(mirror, blocks_for(std::uint64_t{logs} * 32), kThreads, 0, stream_, logs_,
           mirror_.data(), layout_.log_chunks, logs, positions_.data(), tails);
  }
  launch(place, blocks_for(logs), kThreads, 0, stream_, r, epoch, applied, window_, slots_.data(),
         positions_.data(), counts_.data());
  check_cuda(cudaMemcpyAsync(counts_.data() + 1, counts_.data() + 3, sizeof(std::uint64_t),
                             cudaMemcpyDeviceToDevice, stream_),
             "cudaMemcpyAsync (tx replay counts)");
  launch(gap, blocks_for(window_), kThreads, 0, stream_, slots_.data(), counts_.data());
  launch(claim, blocks_for(window_), kThreads, 0, stream_, r, slots_.data(), counts_.data(),
         claims_.data());
  launch(write, blocks_for(window_), kThreads, 0, stream_, r, slots_.data(), counts_.data(),
         claims_.data(), home_, positions_.data(), site);
  result out;
  out.positions.resize(logs);
  std::uint64_t counts[kCounts] = {};
  check_cuda(cudaMemcpyAsync(out.positions.data(), positions_.data(), logs * sizeof(std::uint64_t),
                             cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpyAsync (tx replay positions)");
  check_cuda(cudaMemcpyAsync(counts, counts_.data(), sizeof counts, cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpyAsync (tx replay counts)");
  stream_.synchronize();
  out.records = prefix_of(counts);
  return out;
}

}  // namespace gpm::detail::tx
