// The on-media format of a transactional heap (gpm::tx_heap), version 2.0; docs/transactions.md
// ("On-media format") describes it for humans. A heap is one named pool object:
//
//   [0, 128)          header: gpm::format::object_header (magic "GPMTXHP", version, object size,
//                     uuid, checksum) and the geometry (words, logs, chunks per log); immutable
//   [128, 256)        two root records: the `applied` root (applied_seq, epoch, log kind),
//                     double-buffered
//   control_offset()  one 128-byte control line per log: head (host), persisted (device)
//   home_offset()     the home image: `words` 32-bit words, what every applied commit wrote
//   log_offset()      `logs` redo logs of `log_chunks` 16-byte chunks each, used as rings (or,
//                     in an undo epoch, as every thread's undo slot)
//
// A redo record is a run of chunks in one log at a stream position (chunks since the epoch
// began; the chunk's place in the log is the position modulo log_chunks), read as 8-byte slots:
//   slot 0  the head (2.0): the low 40 bits of seq, the commit's place in the global order
//           (bits 0..39), the count of (word, value) pairs (40..51), and for a member of a
//           striped group (tx_mode::hcl) the group's width (52..57) and the member's rank (58..63)
//   slot 1  checksum of the head and the pairs, seeded with the heap's salt, the epoch, the log
//           and the position, so a stale record (older lap or epoch) never validates
//   slots 2 .. count + 1   word (low 32 bits) | value (high 32 bits)
//   a zero slot to fill the last chunk
// A record with a valid checksum is its commit mark. Nothing here is a pointer. A reader rebuilds
// a record's seq from its 40 bits as the number nearest the heap's applied seq (seq_near): every
// record a reader can find lies within the logs' capacity plus the threads' commits in flight of
// it, far less than 2^39 numbers. Version 1.x records spent a whole slot on the seq and another
// on the count, 16 bytes more for a two-word write set (48 bytes instead of 32).
//
// A striped group (HCL layout) is the records of k lanes that committed together: they take k
// consecutive sequence numbers and depth * k chunks from position P (depth: the longest member's
// chunks), and member i's chunk j lies at position P + j * k + i, so the k lanes storing their
// j-th chunks at once store k adjacent chunks. A plain record is a group of one (width 0 in its
// head).
//
// An undo record (tx_mode::undo) has the redo record's slots with the words' old values, striped
// as a member of a group of 32 (its thread's lane) in its thread's fixed undo slot, and a checksum
// seeded with the undo salt; a retired one has its head cleared.
// This header must stay free of device-only code: host tools and tests read it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>
#include <gpm/pool/object_header.hpp>

namespace gpm::format::tx {

// 2.0: records with a 40-bit seq in their head slot; 1.x heaps (a whole slot each for seq and
// count) are refused with errc::version.
inline constexpr std::uint16_t kMajor = 2;
inline constexpr std::uint16_t kMinor = 0;
inline constexpr std::uint64_t kTypeTag = 0x6770747868656170ull;  // pool type tag: "gptxheap"

inline constexpr std::uint64_t kLineBytes = 128;
inline constexpr std::uint64_t kChunkBytes = 16;        // what one lane stores at once
inline constexpr std::uint64_t kMaxWords = 1ull << 32;  // record pairs hold 32-bit word indices

struct heap_header {
  object_header common;  // kind "transactional heap"; header_bytes = sizeof(heap_header)
  std::uint64_t words;           // 32-bit words in the heap (1 .. 2^32)
  std::uint64_t log_chunks;      // 16-byte chunks per log
  std::uint32_t logs;            // redo logs (one per block of a helpers launch)
  std::uint32_t reserved0;
  std::uint64_t reserved[5];
};
static_assert(sizeof(heap_header) == kLineBytes && std::is_trivially_copyable_v<heap_header>);

// What the common validator checks a heap's header against.
inline constexpr object_kind kHeapKind{"transactional heap",
                                               {'G', 'P', 'M', 'T', 'X', 'H', 'P', '\0'},
                                               kMajor,
                                               kMinor,
                                               sizeof(heap_header)};

// Mutable root, double-buffered: an update writes the slot not holding the newest record, with
// seq + 1; the valid slot with the higher seq is the root.
struct root_record {
  std::uint64_t seq;
  std::uint64_t applied_seq;  // every commit up to this seq is in the home image
  std::uint64_t epoch;        // records are checksummed with it; recovery bumps it
  std::uint64_t undo;         // 1.1: 1 when this epoch's logs hold undo records, not redo
  std::uint64_t reserved[3];
  std::uint64_t checksum;
};
static_assert(sizeof(root_record) == 64);

inline std::uint64_t root_checksum(const root_record& r) {
  return checksum64(&r, offsetof(root_record, checksum)) ^ 0x54585230524f4f54ull;
}

// One per log, written by the host: `head` (chunks before it are applied: the log may reuse
// them). The rest of the line is reserved.
struct log_control {
  std::uint64_t head;
  std::uint64_t reserved[15];
};
static_assert(sizeof(log_control) == kLineBytes);

inline constexpr std::uint64_t kRootOffset = sizeof(heap_header);
inline constexpr std::uint64_t kControlOffset = kRootOffset + 2 * sizeof(root_record);
static_assert(kControlOffset == 2 * kLineBytes);

GPM_HOST_DEVICE constexpr std::uint64_t round_up(std::uint64_t x, std::uint64_t to) {
  return (x + to - 1) / to * to;
}

// Where the parts of a heap of this geometry lie, from the start of the object.
struct heap_layout {
  std::uint64_t words = 0;
  std::uint64_t log_chunks = 0;
  std::uint32_t logs = 0;

  GPM_HOST_DEVICE constexpr std::uint64_t control_offset() const { return kControlOffset; }
  GPM_HOST_DEVICE constexpr std::uint64_t home_offset() const {
    return kControlOffset + std::uint64_t{logs} * sizeof(log_control);
  }
  GPM_HOST_DEVICE constexpr std::uint64_t log_offset() const {
    return home_offset() + round_up(words * 4, kLineBytes);
  }
  GPM_HOST_DEVICE constexpr std::uint64_t log_bytes() const { return log_chunks * kChunkBytes; }
  // The object's size is log_offset() plus the logs, computed overflow-checked on the host
  // (object_bytes_of in src/tx/media.cpp), the one place sizes come from callers or media.
};

// ---- redo records ---------------------------------------------------------------------------

// The seed that binds records to one heap: from its uuid.
inline std::uint64_t salt_of(const heap_header& h) {
  std::uint64_t a, b;
  std::memcpy(&a, h.common.uuid, 8);
  std::memcpy(&b, h.common.uuid + 8, 8);
  return a ^ mix64(b);
}

// Chunks a record of `count` pairs occupies: its head, pairs and checksum, rounded up.
GPM_HOST_DEVICE constexpr std::uint64_t record_chunks(std::uint64_t count) {
  return (count + 2 + 1) / 2;
}

inline constexpr std::uint32_t kMaxGroupWidth = 32;  // a warp
inline constexpr std::uint32_t kMaxPairs = (1u << 12) - 1;  // what a head's count holds
inline constexpr unsigned kSeqBits = 40;
inline constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kSeqBits) - 1;
inline constexpr std::uint64_t kChecksumSlot = 1;
inline constexpr std::uint64_t kFirstPair = 2;  // the slot of a record's first pair

// A record's head (slot 0): seq's low 40 bits, the pair count, a striped group's width and the
// member's rank (0, 0 for a plain record).
GPM_HOST_DEVICE constexpr std::uint64_t head_slot(std::uint64_t seq, std::uint32_t count,
                                                  std::uint32_t width, std::uint32_t rank) {
  return (seq & kSeqMask) | std::uint64_t{count} << 40 | std::uint64_t{width} << 52 |
         std::uint64_t{rank} << 58;
}
GPM_HOST_DEVICE constexpr std::uint32_t count_of(std::uint64_t head) {
  return static_cast<std::uint32_t>(head >> 40) & kMaxPairs;
}
GPM_HOST_DEVICE constexpr std::uint32_t width_of(std::uint64_t head) {
  return static_cast<std::uint32_t>(head >> 52) & 0x3f;
}
GPM_HOST_DEVICE constexpr std::uint32_t rank_of(std::uint64_t head) {
  return static_cast<std::uint32_t>(head >> 58);
}
// The seq whose low 40 bits the head holds that lies nearest `near` (within 2^39 of it; the
// arithmetic wraps around 2^64 as the numbers do).
GPM_HOST_DEVICE constexpr std::uint64_t seq_near(std::uint64_t head, std::uint64_t near) {
  const std::uint64_t ahead = (head - near) & kSeqMask;
  return ahead < (kSeqMask >> 1) + 1 ? near + ahead : near + ahead - (kSeqMask + 1);
}

GPM_HOST_DEVICE constexpr std::uint64_t pair_slot(std::uint32_t word, std::uint32_t value) {
  return std::uint64_t{word} | std::uint64_t{value} << 32;
}

// The seed of a record's checksum, which binds it to where it lies. Every component goes through
// the mixer: a component left outside it would meet the first slot (the seq) in a plain XOR, and
// a stale chunk one lap back, at position p - n with seq s', would validate under a new first
// chunk whenever p ^ s == (p - n) ^ s'. log_seed is its part fixed for one log of one epoch.
GPM_HOST_DEVICE inline std::uint64_t log_seed(std::uint64_t salt, std::uint64_t epoch,
                                              std::uint32_t log) {
  return mix64(mix64(mix64(salt ^ 0x5458524543ull) ^ epoch) ^ log);
}
// record_seed from its log's log_seed: what a writer that places many records in one log (a
// block of tx_heap::launch's kernel) computes per record.
GPM_HOST_DEVICE inline std::uint64_t record_seed_in(std::uint64_t log_key, std::uint64_t position) {
  return mix64(log_key ^ position);
}
GPM_HOST_DEVICE inline std::uint64_t record_seed(std::uint64_t salt, std::uint64_t epoch,
                                                 std::uint32_t log, std::uint64_t position) {
  return record_seed_in(log_seed(salt, epoch, log), position);
}
// Undo records' checksums start from another salt, so that an undo record never validates as a
// redo record or the other way round.
GPM_HOST_DEVICE constexpr std::uint64_t undo_salt(std::uint64_t salt) {
  return salt ^ 0x554e444f5245434full;  // "UNDORECO"
}
GPM_HOST_DEVICE inline std::uint64_t fold_slot(std::uint64_t h, std::uint64_t slot) {
  return mix64(h ^ slot) + 0x9e3779b97f4a7c15ull;
}
GPM_HOST_DEVICE inline std::uint64_t finish_checksum(std::uint64_t h) { return mix64(h); }

// The checksum of a record of `count` pairs: its head and pairs folded into `seed`.
// `Record` is anything with slot(i): a write set on the device, slots read back on the host.
template <class Record>
GPM_HOST_DEVICE std::uint64_t record_checksum(const Record& r, std::uint64_t count,
                                              std::uint64_t seed) {
  std::uint64_t h = fold_slot(seed, r.slot(0));
  GPM_UNROLL_1
  for (std::uint64_t i = kFirstPair; i < kFirstPair + count; ++i) h = fold_slot(h, r.slot(i));
  return finish_checksum(h);
}

// A write set given as parallel arrays, as its record's slots (checksum and padding included):
// what a committer stores.
struct record_source {
  std::uint64_t head;
  std::uint32_t count;
  const std::uint32_t* words;
  const std::uint32_t* values;
  std::uint64_t checksum;  // record_checksum(*this, count, seed)

  // `width`, `rank`: a striped group's width and this member's rank; 0, 0: a plain record.
  GPM_HOST_DEVICE record_source(std::uint64_t seq, std::uint32_t count, const std::uint32_t* words,
                                const std::uint32_t* values, std::uint64_t checksum,
                                std::uint32_t width = 0, std::uint32_t rank = 0)
      : head(head_slot(seq, count, width, rank)),
        count(count),
        words(words),
        values(values),
        checksum(checksum) {}

  GPM_HOST_DEVICE std::uint64_t slot(std::uint64_t i) const {
    if (i == 0) return head;
    return i == kChecksumSlot ? checksum : pair(i - kFirstPair);
  }
  // Pair k's slot, 0 past the last (the padding of the last chunk).
  GPM_HOST_DEVICE std::uint64_t pair(std::uint64_t k) const {
    return k < count ? pair_slot(words[k], values[k]) : 0;
  }
};

}  // namespace gpm::format::tx

namespace gpm::detail::tx {
using namespace gpm::format::tx;  // the machinery speaks its format's names unqualified
}  // namespace gpm::detail::tx
