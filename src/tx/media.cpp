// The heap object's header, root and records on the host (see media.hpp).
#include "media.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <optional>

#include <gpm/platform/checked_math.hpp>
#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpm::detail::tx {

namespace {

constexpr std::uint64_t kMinLogBytes = 256;

root_record* roots(char* object) { return reinterpret_cast<root_record*>(object + kRootOffset); }

// Kernels write the logs while the host reads them: slots are read atomically, and a record is
// trusted only if the values read pass its checksum. Once they do, the record's slots no longer
// change: its chunks are reused only after the host has applied it and published the log's head.
std::uint64_t load_slot(const std::uint64_t* slot) {
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(slot))
      .load(std::memory_order_relaxed);
}

// The slots of the record whose first chunk lies at stream position `pos` of a log of `n` chunks,
// its chunks `stride` positions apart. Slot i lies in chunk i / 2, less than n positions past the
// first (read_record checks chunks * stride <= n before it reads beyond slot 1), so a record
// wraps around the end of its log at most once.
class record_slots {
 public:
  record_slots(const std::uint64_t* log, std::uint64_t n, std::uint64_t pos, std::uint64_t stride)
      : log_(log), n_(n), first_(pos % n), stride_(stride) {}
  std::uint64_t operator[](std::uint64_t i) const {
    std::uint64_t chunk = first_ + i / 2 * stride_;
    if (chunk >= n_) chunk -= n_;
    return load_slot(&log_[2 * chunk + i % 2]);
  }

 private:
  const std::uint64_t* log_;
  std::uint64_t n_;
  std::uint64_t first_;
  std::uint64_t stride_;
};

}  // namespace

// The object bytes of a heap geometry whose words are at most kMaxWords (heap_layout's log offset
// plus its logs), or nothing when its logs do not fit in 64 bits (a caller's log_bytes, or a
// crafted header: wrapped around, a huge log would pass as a small object and be addressed far
// outside it).
std::optional<std::uint64_t> object_bytes_of(std::uint64_t words, std::uint64_t log_chunks,
                                             std::uint32_t logs) {
  const auto log_bytes = checked_mul(log_chunks, kChunkBytes);
  const auto all_logs = log_bytes ? checked_mul(logs, *log_bytes) : std::nullopt;
  return all_logs ? checked_add(heap_layout{words, log_chunks, logs}.log_offset(), *all_logs)
                  : std::nullopt;
}

heap_header make_header(std::uint64_t words, std::uint32_t logs, std::uint64_t log_bytes) {
  require(words >= 1 && words <= kMaxWords,
          "tx_heap: words must be between 1 and 2^32, got " + std::to_string(words));
  require(logs >= 1, "tx_heap: logs must be at least 1 (one per block of a helpers launch)");
  require(log_bytes >= kMinLogBytes && log_bytes % kChunkBytes == 0,
          "tx_heap: log_bytes must be a multiple of 16 and at least 256, got " +
              std::to_string(log_bytes));
  heap_header h{};
  h.words = words;
  h.logs = logs;
  h.log_chunks = log_bytes / kChunkBytes;
  const std::optional<std::uint64_t> bytes = object_bytes_of(words, h.log_chunks, logs);
  require(bytes.has_value(), "tx_heap: " + std::to_string(logs) + " logs of " +
                                 std::to_string(log_bytes) + " bytes do not fit in 64-bit sizes");
  h.common = format::make_header(kHeapKind, *bytes);
  format::seal_header(&h);
  return h;
}

heap_header check_geometry(const void* object, std::uint64_t object_bytes,
                           const std::string& what) {
  heap_header h;
  std::memcpy(&h, object, sizeof h);
  const bool sane = h.words >= 1 && h.words <= kMaxWords && h.logs >= 1 &&
                    h.log_chunks >= kMinLogBytes / kChunkBytes;
  const std::optional<std::uint64_t> bytes =
      sane ? object_bytes_of(h.words, h.log_chunks, h.logs) : std::nullopt;
  const bool geometry_ok = bytes && *bytes == h.common.object_bytes;
  if (!geometry_ok) {
    throw_error(errc::corrupt, what + " has inconsistent sizes (" +
                                   std::to_string(h.common.object_bytes) +
                                   " bytes recorded for its geometry, object of " +
                                   std::to_string(object_bytes) + "): it cannot be used");
  }
  return h;
}

heap_media::heap_media(char* object, const heap_header& h, std::string what)
    : object_(object),
      layout_{h.words, h.log_chunks, h.logs},
      salt_(salt_of(h)),
      what_(std::move(what)) {}

std::uint32_t* heap_media::home() const {
  return reinterpret_cast<std::uint32_t*>(object_ + layout_.home_offset());
}

log_control& heap_media::control(std::uint32_t log) const {
  return reinterpret_cast<log_control*>(object_ + layout_.control_offset())[log];
}

root_record heap_media::root() const {
  const root_record* best = nullptr;
  for (int i = 0; i < 2; ++i) {
    const root_record& r = roots(object_)[i];
    if (r.checksum == root_checksum(r) && (best == nullptr || r.seq > best->seq)) best = &r;
  }
  if (best == nullptr) {
    throw_error(errc::corrupt, what_ +
                                   " has no valid `applied` root (both copies fail their "
                                   "checksum): restore the pool from its snapshot");
  }
  return *best;
}

void heap_media::write_root(std::uint64_t applied, std::uint64_t epoch, bool undo,
                            const char* site) {
  root_record r{};
  // A heap being created has no valid root yet: its first root gets seq 1.
  const root_record* slots = roots(object_);
  const bool any =
      slots[0].checksum == root_checksum(slots[0]) || slots[1].checksum == root_checksum(slots[1]);
  r.seq = any ? root().seq + 1 : 1;
  r.applied_seq = applied;
  r.epoch = epoch;
  r.undo = undo ? 1 : 0;
  r.checksum = root_checksum(r);
  root_record& slot = roots(object_)[r.seq % 2];
  std::memcpy(&slot, &r, sizeof r);
  persist_at(site, &slot, sizeof slot);
}

const std::uint64_t* heap_media::log_slots(std::uint32_t log) const {
  return reinterpret_cast<const std::uint64_t*>(object_ + layout_.log_offset()) +
         2 * layout_.log_chunks * log;
}

std::optional<record> heap_media::read_record(std::uint32_t log, std::uint64_t pos,
                                              std::uint64_t epoch, bool undo) const {
  const std::uint64_t n = layout_.log_chunks;
  const std::uint64_t* data = log_slots(log);
  // Slots 0 and 1 lie in the record's first chunk whatever its stride; slot 1 gives the stride.
  const record_slots first(data, n, pos, 1);
  record r;
  r.seq = first[0];
  const std::uint64_t header = first[1];
  r.count = count_of(header);
  r.width = width_of(header) == 0 ? 1 : width_of(header);
  r.rank = rank_of(header);
  if (r.count == 0 || r.width > kMaxGroupWidth || r.rank >= r.width ||
      record_chunks(r.count) * r.width > n) {
    return std::nullopt;
  }
  // Slots 0 and 1 as read above, so that the values checked are the values used.
  struct read_back {
    record_slots slots;
    std::uint64_t seq, header;
    std::uint64_t slot(std::uint64_t i) const { return i == 0 ? seq : i == 1 ? header : slots[i]; }
  };
  const read_back rec{record_slots(data, n, pos, r.width), r.seq, header};
  const std::uint64_t sum =
      record_checksum(rec, r.count, record_seed(undo ? undo_salt(salt_) : salt_, epoch, log, pos));
  if (sum != rec.slots[r.count + 2]) return std::nullopt;
  for (std::uint64_t i = 0; i < r.count; ++i) {
    if ((rec.slots[i + 2] & 0xffffffffu) >= layout_.words) return std::nullopt;  // not ours
  }
  r.log = log;
  r.pos = pos;
  r.chunks = record_chunks(r.count);
  return r;
}

std::optional<log_unit> heap_media::read_unit(std::uint32_t log, std::uint64_t pos,
                                              std::uint64_t epoch) const {
  const std::optional<record> first = read_record(log, pos, epoch);
  if (!first || first->rank != 0) return std::nullopt;
  log_unit u{first->seq, pos, 0, log, first->width};
  std::uint64_t depth = first->chunks;
  // A member still being written (or torn) hides the whole group: the scan waits for it.
  for (std::uint32_t i = 1; i < u.width; ++i) {
    const std::optional<record> m = read_record(log, pos + i, epoch);
    if (!m || m->width != u.width || m->rank != i || m->seq != u.seq + i) return std::nullopt;
    depth = std::max(depth, m->chunks);
  }
  u.chunks = depth * u.width;
  return u;
}

void heap_media::prefetch(std::uint32_t log, std::uint64_t pos) const {
  // Two 64-byte lines (8 chunks): a record of a few pairs, or a striped group's first chunks.
  const std::uint64_t* data = log_slots(log);
  for (std::uint64_t c = 0; c < 8; c += 4) {
    __builtin_prefetch(&data[2 * ((pos + c) % layout_.log_chunks)]);
  }
}

void heap_media::apply_pairs(std::uint32_t log, std::uint64_t pos, std::uint32_t width,
                             std::uint32_t count, touched_words& touched) const {
  const record_slots slots(log_slots(log), layout_.log_chunks, pos, width);
  std::uint32_t* h = home();
  for (std::uint64_t i = 2; i < std::uint64_t{count} + 2; ++i) {
    const std::uint64_t p = slots[i];
    h[p & 0xffffffffu] = static_cast<std::uint32_t>(p >> 32);
    touched.add(p & 0xffffffffu);
  }
}

void heap_media::apply(const record& r, touched_words& touched) const {
  apply_pairs(r.log, r.pos, r.width, r.count, touched);
}

std::uint64_t heap_media::apply(const log_unit& u, std::uint64_t after,
                                touched_words& touched) const {
  std::uint64_t applied = 0;
  for (std::uint32_t i = 0; i < u.width; ++i) {
    if (u.seq + i <= after) continue;
    const std::uint64_t header =
        record_slots(log_slots(u.log), layout_.log_chunks, u.pos + i, 1)[1];
    apply_pairs(u.log, u.pos + i, u.width, count_of(header), touched);
    ++applied;
  }
  return applied;
}

void heap_media::persist_home(const touched_words& touched, const char* site) const {
  if (!touched.empty()) {
    persist_at(site, home() + touched.lo, (touched.hi - touched.lo + 1) * sizeof(std::uint32_t));
  }
}

}  // namespace gpm::detail::tx
