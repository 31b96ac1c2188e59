// On-media format shared by gpm::hcl_log and gpm::conv_log, version 2.0 (see docs/logging.md,
// "Layout"), and the batch record of gpm::basic_undo_tx over either. A log is one named pool
// object:
//
//   [0, 128)        header: the common object header (magic, version, sizes, uuid, checksum),
//                   then kind and geometry (immutable)
//   [128, 256)      state: the generation (the one mutable word recovery trusts besides tails)
//   [256, 384)      fault record: what device operations failed since the log was opened
//   control_offset  one control per stream: the tail word (hcl: 8 bytes per thread, so a warp's
//                   tails coalesce; conv: a 128-byte line per partition holding lock and tail)
//   data_offset     the entries (hcl: striped across 128-byte rows; conv: packed per partition)
//
// A "stream" is what owns a tail: one GPU thread of the recorded geometry (hcl) or one partition
// (conv). All offsets are 64-bit and relative to the object, never pointers.
// Its names live in gpm::format::log; the log's machinery (gpm::detail::log) uses them unqualified.
// This header must stay free of device code: host tools read it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>
#include <gpm/pool/object_header.hpp>

namespace gpm::format::log {

enum class kind : std::uint32_t { hcl = 1, conv = 2 };

// A GPU coalesces a warp's stores that fall in one aligned 128-byte line into one transaction.
inline constexpr std::uint64_t line_bytes = 128;
inline constexpr std::uint64_t chunk_bytes = 4;  // what one lane writes per row
inline constexpr std::uint32_t warp_lanes = 32;
static_assert(line_bytes == chunk_bytes * warp_lanes);

// Every entry ends with a trailer of 3 chunks: its size in bytes and a 64-bit checksum that folds
// in the generation, the stream and the entry's position.
inline constexpr std::uint64_t trailer_chunks = 3;

GPM_HOST_DEVICE constexpr std::uint64_t chunks_for(std::uint64_t bytes) {
  return (bytes + chunk_bytes - 1) / chunk_bytes;
}
// Chunks an entry of `bytes` payload bytes occupies in its stream.
GPM_HOST_DEVICE constexpr std::uint64_t entry_chunks(std::uint64_t bytes) {
  return chunks_for(bytes) + trailer_chunks;
}
GPM_HOST_DEVICE constexpr std::uint64_t round_up(std::uint64_t x, std::uint64_t to) {
  return (x + to - 1) / to * to;
}

struct header {
  object_header common;  // magic "GPMLOG1\0"; object_bytes: the pool object's size
  std::uint32_t kind;
  std::uint32_t blocks;  // hcl geometry; 0 for conv
  std::uint32_t threads_per_block;
  std::uint32_t warps_per_block;
  std::uint64_t streams;        // hcl: blocks * threads_per_block; conv: partitions
  std::uint64_t stream_chunks;  // capacity of one stream in 4-byte chunks
  std::uint64_t control_offset;
  std::uint64_t control_stride;
  std::uint64_t data_offset;
  std::uint64_t data_bytes;
};
static_assert(sizeof(header) == line_bytes && offsetof(header, common) == 0 &&
              std::is_trivially_copyable_v<header>);

// Version 2.0 put the common object header first; 1.0 had its own magic, version and checksum
// words (the same magic bytes, so a 1.0 log is refused as older, not as foreign).
inline constexpr object_kind kKind{
    "gpmkit log", {'G', 'P', 'M', 'L', 'O', 'G', '1', '\0'}, 2, 0, sizeof(header)};

// The batch record of an undo transaction (gpm::basic_undo_tx; docs/logging.md, "Undo
// transactions"): a pool object of its own beside its log, holding this header and then the mark,
// (batches committed << 1) | active, alone in the next line. Version 2.0 put the common object
// header first; 1.0 had its own magic, version and checksum words (the same magic bytes, so a 1.0
// record is refused as older, not as foreign).
struct undo_record_header {
  object_header common;       // magic "GMUNDOX1"; object_bytes: undo_record_bytes
  std::uint64_t reserved[8];  // zero: the header fills its line, so the mark has one of its own
};
static_assert(sizeof(undo_record_header) == line_bytes &&
              offsetof(undo_record_header, common) == 0);

inline constexpr object_kind kUndoRecordKind{"gpm::undo_tx batch record",
                                             {'G', 'M', 'U', 'N', 'D', 'O', 'X', '1'},
                                             2,
                                             0,
                                             sizeof(undo_record_header)};
inline constexpr std::uint64_t undo_mark_offset = line_bytes;
inline constexpr std::uint64_t undo_record_bytes = 2 * line_bytes;

// Truncating a log is one persisted 8-byte store: bumping the generation makes every tail
// written under an older one read as empty, and every entry checksum computed under it fail.
struct state {
  std::uint64_t generation;  // starts at 1; a zero-filled tail never matches
  std::uint64_t reserved[15];
};
static_assert(sizeof(state) == line_bytes);

// Written by device code when an operation fails (status other than ok and empty), read by the
// host. Not part of the recovery protocol: reset when the log is opened.
struct fault_record {
  std::uint32_t mask;     // log_status_bit() of every failure seen
  std::uint32_t claimed;  // 1 once the first failure's details below are written
  std::uint32_t status;   // the first failure
  std::uint32_t ready;    // 1 once the details are complete
  std::uint64_t stream;   // its thread (hcl) or partition (conv); ~0 when not known
  std::uint32_t grid[3];  // the failing kernel's launch
  std::uint32_t block[3];
  std::uint64_t count;  // failures seen
  std::uint64_t reserved[9];
};
static_assert(sizeof(fault_record) == line_bytes);

inline constexpr std::uint64_t state_offset = line_bytes;
inline constexpr std::uint64_t fault_offset = 2 * line_bytes;
inline constexpr std::uint64_t control_offset = 3 * line_bytes;

// conv_log's per-partition control line.
struct partition_control {
  std::uint64_t tail;
  std::uint32_t unused;  // held the partition's lock until the locks moved to GPU memory
  std::uint32_t reserved0;
  std::uint64_t reserved[14];
};
static_assert(sizeof(partition_control) == line_bytes);

// A tail word packs the stream's used chunks (low 40 bits: 4 TiB per stream) with the low 24
// bits of the generation it was written under, so one 8-byte store publishes both and a tail
// from an older generation reads as empty without touching it.
inline constexpr int tail_used_bits = 40;
inline constexpr std::uint64_t tail_used_mask = (1ull << tail_used_bits) - 1;
inline constexpr std::uint64_t tail_tag_mask = (1ull << (64 - tail_used_bits)) - 1;
inline constexpr std::uint64_t max_stream_chunks = tail_used_mask;

GPM_HOST_DEVICE constexpr std::uint64_t tail_word(std::uint64_t generation, std::uint64_t used) {
  return ((generation & tail_tag_mask) << tail_used_bits) | used;
}
GPM_HOST_DEVICE constexpr std::uint64_t tail_used(std::uint64_t word, std::uint64_t generation) {
  return (word >> tail_used_bits) == (generation & tail_tag_mask) ? word & tail_used_mask : 0;
}
// When a clear makes the tag wrap around, tails written 2^24 generations ago would match again:
// the host then rewrites every tail (once per 16 M clears).
GPM_HOST_DEVICE constexpr bool tag_wraps(std::uint64_t new_generation) {
  return (new_generation & tail_tag_mask) == 0;
}

// The checksum of one entry: its chunks folded in order into a seed that binds the entry to its
// generation, stream, position and size, so a stale, moved or truncated entry never validates.
GPM_HOST_DEVICE inline std::uint64_t entry_seed(std::uint64_t generation, std::uint64_t stream,
                                                std::uint64_t begin, std::uint64_t bytes) {
  return mix64(mix64(mix64(generation ^ 0x4c4f47454e545259ull) ^ stream) ^ begin) ^ bytes;
}
GPM_HOST_DEVICE inline std::uint64_t fold_chunk(std::uint64_t h, std::uint32_t chunk) {
  return mix64(h ^ chunk) + 0x9e3779b97f4a7c15ull;
}

}  // namespace gpm::format::log

namespace gpm::detail::log {
using namespace gpm::format::log;  // the machinery speaks its format's names unqualified
}  // namespace gpm::detail::log
