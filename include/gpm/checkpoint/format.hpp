// The on-media format of a gpm::checkpointer, version 2.0 (docs/checkpointing.md, "On media").
// A checkpoint named N is one pool object "cp.N" holding, at 128-byte aligned offsets:
//
//   header            immutable after create: the common object header (magic, version, sizes,
//                     uuid, checksum), then capacity, offsets and name
//   chunk table       max_chunks entries, each self-validating (written once by add())
//   commit record 0   the double-buffered commit record: the valid one with the higher
//   commit record 1   sequence number is the consistent state; the other is overwritten next
//
// and, per chunk i, two pool objects "cp.N.i.a" and "cp.N.i.b": its two copies on media. A
// commit record says, per chunk, which copy is consistent and the copy's digest. Writing the
// other record and persisting it is the atomic flip: a torn record fails its checksum and the
// previous one stays in force. Only src/checkpoint and tests include this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gpm/pool/object_header.hpp>

namespace gpm::format::checkpoint {

inline constexpr std::uint64_t kRecordMagic = 0x31434552504d4347ull;  // "GCMPREC1"
inline constexpr std::size_t kCheckpointNameMax = 31;
inline constexpr std::size_t kChunkNameMax = 63;
inline constexpr std::uint32_t kMaxChunksLimit = 4096;
inline constexpr std::uint64_t kAlign = 128;

struct header {
  object_header common;  // object_bytes: object_bytes(max_chunks)
  std::uint32_t max_chunks;
  std::uint32_t reserved;
  std::uint64_t table_offset;    // from the start of the object
  std::uint64_t records_offset;  // record 0; record 1 follows at + record_bytes
  std::uint64_t record_bytes;    // one commit record, rounded up to kAlign
  char name[kCheckpointNameMax + 1];
};
static_assert(sizeof(header) == 128 && offsetof(header, common) == 0);

// Version 2.0 put the common object header first. Its magic keeps the bytes 1.0 wrote (the
// little-endian 0x3154504b43504d47), so a 1.0 checkpoint is refused as older, not as foreign.
inline constexpr object_kind kKind{
    "checkpoint", {'G', 'M', 'P', 'C', 'K', 'P', 'T', '1'}, 2, 0, sizeof(header)};

struct chunk_entry {
  char name[kChunkNameMax + 1];
  std::uint64_t bytes;
  std::uint64_t type_tag;
  std::uint64_t copy_offset[2];  // pool offsets of the two copies
  std::uint32_t group;
  std::uint32_t index;  // its own position, so that a misplaced entry is detected
  std::uint64_t used;   // 1 for a registered chunk
  std::uint64_t reserved;
  std::uint64_t checksum;
};
static_assert(sizeof(chunk_entry) == 128);

// Per chunk, in a commit record.
struct record_entry {
  std::uint64_t digest;         // of the consistent copy (gpm::chunk_digest)
  std::uint64_t confirmed_seq;  // the newest checkpoint that found the chunk equal to that copy
  std::uint64_t written_seq;    // the checkpoint that wrote that copy (0: never checkpointed)
  std::uint32_t slot;           // 0 or 1: which copy is consistent
  std::uint32_t reserved;
};
static_assert(sizeof(record_entry) == 32);

struct record_head {
  std::uint64_t magic;
  std::uint64_t seq;  // checkpoints completed so far; the higher valid record is in force
  std::uint32_t max_chunks;
  std::uint32_t reserved;
  std::uint64_t checksum;  // over the head (this field as zero) and all entries, seeded by seq
};
static_assert(sizeof(record_head) == 32);

inline constexpr std::uint64_t round_up(std::uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}
inline constexpr std::uint64_t record_bytes(std::uint32_t max_chunks) {
  return round_up(sizeof(record_head) + std::uint64_t{max_chunks} * sizeof(record_entry));
}
inline constexpr std::uint64_t object_bytes(std::uint32_t max_chunks) {
  return sizeof(header) + std::uint64_t{max_chunks} * sizeof(chunk_entry) +
         2 * record_bytes(max_chunks);
}

}  // namespace gpm::format::checkpoint
