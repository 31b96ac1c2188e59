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
      reader_{reinterpret_cast<const std::uint64_t*>(object + layout_.log_offset()), layout_,
              salt_of(h)},
      what_(std::move(what)) {}

std::uint64_t heap_media::host_load::operator()(const std::uint64_t* slot) const {
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(slot))
      .load(std::memory_order_relaxed);
}

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

std::optional<record> heap_media::read_record(std::uint32_t log, std::uint64_t pos,
                                              std::uint64_t epoch, std::uint64_t near,
                                              bool undo) const {
  record r;
  if (!reader_.read_record(log, pos, epoch, near, undo, r)) return std::nullopt;
  return r;
}

std::optional<log_unit> heap_media::read_unit(std::uint32_t log, std::uint64_t pos,
                                              std::uint64_t epoch, std::uint64_t near) const {
  log_unit u;
  if (!reader_.read_unit(log, pos, epoch, near, u)) return std::nullopt;
  return u;
}

void heap_media::prefetch(std::uint32_t log, std::uint64_t pos) const {
  // Two 64-byte lines (8 chunks): a record of a few pairs, or a striped group's first chunks.
  const std::uint64_t* data = reader_.slots(log);
  for (std::uint64_t c = 0; c < 8; c += 4) {
    __builtin_prefetch(&data[2 * ((pos + c) % layout_.log_chunks)]);
  }
}

void heap_media::apply_pairs(std::uint32_t log, std::uint64_t pos, std::uint32_t width,
                             std::uint32_t count, touched_words& touched) const {
  const auto slots = reader_.at(log, pos, width);
  std::uint32_t* h = home();
  for (std::uint64_t i = kFirstPair; i < kFirstPair + count; ++i) {
    const std::uint64_t p = slots[i];
    h[p & 0xffffffffu] = static_cast<std::uint32_t>(p >> 32);
    touched.add(p & 0xffffffffu);
  }
}

void heap_media::apply(const record& r, touched_words& touched) const {
  apply_pairs(r.log, r.pos, r.width, r.count, touched);
}

std::uint64_t heap_media::apply(const log_unit& u, std::uint64_t after, std::uint64_t through,
                                touched_words& touched) const {
  std::uint64_t applied = 0;
  for (std::uint32_t i = 0; i < u.width && u.seq + i <= through; ++i) {
    if (u.seq + i <= after) continue;
    const std::uint64_t head = reader_.at(u.log, u.pos + i, 1)[0];
    apply_pairs(u.log, u.pos + i, u.width, count_of(head), touched);
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
