// The on-media format of a gpm::ooc epoch log, version 1.0 (docs/out-of-core.md, "Crash-consistent
// sync"): the file's header page with its two root slots, and the head of each record (a record
// holds its bytes, or names where the staging file holds them). Only
// epoch_log.{hpp,cpp} include this; how the log uses them is epoch_log.hpp's comment.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gpm/ooc/detail/protocol.hpp>
#include <gpm/pool/object_header.hpp>

namespace gpm::format::ooc {

inline constexpr std::uint64_t kHeaderPage = 4096;
// Each root slot in a sector of its own, so that a torn write of one never touches the other.
inline constexpr std::uint64_t kRootAt[2] = {1024, 2048};
inline constexpr std::uint32_t kApplied = 1;
inline constexpr std::uint32_t kCommitted = 2;
inline constexpr std::uint32_t kRecordKind = 0x434f4f52;  // "ROOC"
// A record whose bytes lie in the range's staging file (kStaged): its payload in the log is the
// bytes' place in the staging file (8 bytes) and the mask words; the payload checksum covers
// those and then the bytes as the staging file holds them.
inline constexpr std::uint32_t kStagedKind = 0x434f4f53;  // "SOOC"
inline constexpr std::uint32_t kMaxMaskWords = (2u << 20) / detail::ooc::kMaskGranule / 32;
inline constexpr std::uint64_t kMaxRecordBytes = 2ull
                                                 << 20;  // a line (mapping_options::line_bytes)
inline constexpr std::size_t kNameBytes = 256;

struct log_header {
  object_header common;
  std::uint64_t offset;  // the range's start in the data file
  std::uint32_t name_bytes;
  std::uint32_t reserved;
  char name[kNameBytes];  // the data file's name (its last path component)
};
static_assert(sizeof(log_header) == 336 && offsetof(log_header, common) == 0);
static_assert(sizeof(log_header) <= kRootAt[0]);

// Incompatible feature: the range is striped over several files, which the stripe table after
// the header page names; a reader that does not know it would write every record into the first.
inline constexpr std::uint64_t kStriped = 1;
// Incompatible feature: records may be kStagedKind, whose bytes lie in the staging file beside
// the log (epoch_log.hpp); a reader that does not know it would find records it cannot apply.
inline constexpr std::uint64_t kStaged = 2;

inline constexpr object_kind kKind{
    "gpm::ooc epoch log", {'G', 'P', 'M', 'O', 'O', 'C', 'L', 'G'}, 1, 0, sizeof(log_header),
    kStriped | kStaged};

// A striped log's stripe table, at kHeaderPage: this head, then `count` paths (absolute, in stripe
// order), each a 4-byte length and its bytes, the whole padded to 8; its checksum is seeded with
// the log's uuid. The records start at the first multiple of kHeaderPage after it.
struct stripe_table_head {
  std::uint32_t count;
  std::uint32_t reserved;
  std::uint64_t line_bytes;  // the stripe unit: line l is in file l % count
  std::uint64_t bytes;       // of the table, this head included
  std::uint64_t checksum;    // of the table with this field zero
};
static_assert(sizeof(stripe_table_head) == 32);
inline constexpr std::uint32_t kMaxStripes = 1u << 16;
inline constexpr std::uint32_t kMaxStripePathBytes = 4096;

// A root slot, double-buffered: the valid one with the higher seq is in force.
struct epoch_root {
  std::uint64_t seq;
  std::uint64_t epoch;
  std::uint32_t state;  // kApplied or kCommitted
  std::uint32_t pad;
  std::uint64_t records;
  std::uint64_t end;    // the committed records end here
  std::uint64_t chain;  // checksum64 chained over the records' head checksums
  std::uint64_t checksum;
};
static_assert(sizeof(epoch_root) == 56);

struct record_head {
  std::uint32_t kind;
  std::uint32_t mask_words;  // 0: every byte of the record changed
  std::uint64_t epoch;
  std::uint64_t at;  // byte offset in the range
  std::uint64_t bytes;
  std::uint64_t payload_checksum;
  std::uint64_t checksum;  // of the fields above
};
static_assert(sizeof(record_head) == 48);

}  // namespace gpm::format::ooc
