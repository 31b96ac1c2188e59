// Reading records back from a heap's logs (format.hpp): one parser for the host's reproducer
// (src/tx/media.cpp) and the replay kernels (src/tx/replay.cu). Kernels may still be writing the
// logs while they are read, so every slot is read through `Load` (an atomic load, relaxed: the
// host's std::atomic_ref, a kernel's system-scope gpm::atomic_ref), and a record is trusted only
// if the values read pass its checksum. Once they do, its slots no longer change: its chunks are
// reused only after it was applied and its log's head published.
// This header must stay free of device-only code: host code includes it.
#pragma once

#include <cstdint>

#include <gpm/platform/macros.hpp>
#include <gpm/tx/detail/format.hpp>

namespace gpm::detail::tx {

// Where a record with a valid checksum lies in its log. Its pairs stay there and are applied
// from there: the chunks of a record not yet applied are not reused (its log's head stands at or
// before it), so what was validated is what is applied.
struct record {
  std::uint64_t seq = 0;
  std::uint64_t pos = 0;     // stream position of its first chunk
  std::uint64_t chunks = 0;  // its own chunks, `width` positions apart
  std::uint32_t log = 0;
  std::uint32_t count = 0;  // (word, value) pairs
  std::uint32_t width = 1;  // of its striped group (1: a plain record)
  std::uint32_t rank = 0;   // within the group
};

// What one reservation left in a log: a plain record, or every member of a striped group (member
// i's first chunk at pos + i). Its records have the consecutive sequence numbers seq .. last().
struct log_unit {
  std::uint64_t seq = 0;
  std::uint64_t pos = 0;
  std::uint64_t chunks = 0;  // stream positions it occupies
  std::uint32_t log = 0;
  std::uint32_t width = 1;
  GPM_HOST_DEVICE std::uint64_t last() const { return seq + width - 1; }
};

// The slots of the record whose first chunk lies at stream position `pos` of a log of `n` chunks,
// its chunks `stride` positions apart. Slot i lies in chunk i / 2, less than n positions past the
// first (read_record checks chunks * stride <= n before it reads beyond the head), so a record
// wraps around the end of its log at most once.
template <class Load>
class record_slots {
 public:
  GPM_HOST_DEVICE record_slots(const std::uint64_t* log, std::uint64_t n, std::uint64_t pos,
                               std::uint64_t stride)
      : log_(log), n_(n), first_(pos % n), stride_(stride) {}
  GPM_HOST_DEVICE std::uint64_t operator[](std::uint64_t i) const {
    std::uint64_t chunk = first_ + i / 2 * stride_;
    if (chunk >= n_) chunk -= n_;
    return Load{}(&log_[2 * chunk + i % 2]);
  }

 private:
  const std::uint64_t* log_;
  std::uint64_t n_;
  std::uint64_t first_;
  std::uint64_t stride_;
};

// The logs of one heap as one reader sees them: `logs` points at log 0's first slot.
template <class Load>
struct log_reader {
  const std::uint64_t* logs = nullptr;
  heap_layout layout;
  std::uint64_t salt = 0;

  GPM_HOST_DEVICE const std::uint64_t* slots(std::uint32_t log) const {
    return logs + 2 * layout.log_chunks * log;
  }
  GPM_HOST_DEVICE record_slots<Load> at(std::uint32_t log, std::uint64_t pos,
                                        std::uint64_t stride) const {
    return record_slots<Load>(slots(log), layout.log_chunks, pos, stride);
  }

  // Whether a record of `epoch` with a valid checksum lies at stream position `pos` of `log`
  // whose words are all in the heap (a torn, stale or foreign one never does); if so, `out` is
  // it, its seq the one nearest `near` (the applied seq) with the low bits its head holds. A
  // member of a striped group is read with its group's stride. `undo`: an undo record (its
  // pairs hold old values) instead of a redo record.
  GPM_HOST_DEVICE bool read_record(std::uint32_t log, std::uint64_t pos, std::uint64_t epoch,
                                   std::uint64_t near, bool undo, record& out) const {
    const std::uint64_t n = layout.log_chunks;
    // The head lies in the record's first chunk whatever its stride, and gives the stride.
    const std::uint64_t head = at(log, pos, 1)[0];
    record r;
    r.seq = seq_near(head, near);
    r.count = count_of(head);
    r.width = width_of(head) == 0 ? 1 : width_of(head);
    r.rank = rank_of(head);
    if (r.count == 0 || r.width > kMaxGroupWidth || r.rank >= r.width ||
        record_chunks(r.count) * r.width > n) {
      return false;
    }
    // The head as read above, so that the values checked are the values used.
    struct read_back {
      record_slots<Load> slots;
      std::uint64_t head;
      GPM_HOST_DEVICE std::uint64_t slot(std::uint64_t i) const { return i == 0 ? head : slots[i]; }
    };
    const read_back rec{at(log, pos, r.width), head};
    const std::uint64_t sum =
        record_checksum(rec, r.count, record_seed(undo ? undo_salt(salt) : salt, epoch, log, pos));
    if (sum != rec.slots[kChecksumSlot]) return false;
    for (std::uint64_t i = 0; i < r.count; ++i) {
      if ((rec.slots[kFirstPair + i] & 0xffffffffu) >= layout.words) return false;  // not ours
    }
    r.log = log;
    r.pos = pos;
    r.chunks = record_chunks(r.count);
    out = r;
    return true;
  }

  // Whether the plain record or the whole striped group that starts at `pos` is there, every
  // member valid; if so, `out` is it. A member still being written (or torn) hides the whole
  // group: a reader waits for it.
  GPM_HOST_DEVICE bool read_unit(std::uint32_t log, std::uint64_t pos, std::uint64_t epoch,
                                 std::uint64_t near, log_unit& out) const {
    record first;
    if (!read_record(log, pos, epoch, near, false, first) || first.rank != 0) return false;
    // Sequence numbers that wrap around 2^64 are no commit's (a crafted group): not trusted.
    if (first.seq + (first.width - 1) < first.seq) return false;
    log_unit u{first.seq, pos, 0, log, first.width};
    std::uint64_t depth = first.chunks;
    for (std::uint32_t i = 1; i < u.width; ++i) {
      record m;
      if (!read_record(log, pos + i, epoch, near, false, m) || m.width != u.width || m.rank != i ||
          m.seq != u.seq + i) {
        return false;
      }
      depth = m.chunks > depth ? m.chunks : depth;
    }
    u.chunks = depth * u.width;
    out = u;
    return true;
  }
};

}  // namespace gpm::detail::tx
