// The on-media format of a pool's snapshot (docs/format.md, "Snapshots"): the manifest file and
// the journal of changed pages that a snapshot writes before it updates the image on disk. Only
// src/pool/snapshot.cpp includes this.
#pragma once

#include <cstdint>

#include <gpm/pool/object_header.hpp>

namespace gpm::format::snapshot {

inline constexpr std::uint32_t kStateClean = 1;
inline constexpr std::uint32_t kStateJournalPending = 2;

// The manifest file. Its common header carries the pool's uuid (a snapshot is its pool's image)
// and, as created_ns, the time the snapshot was taken; path_hash is pool_path_hash() of the
// absolute path of the pool it belongs to. Version 3.0 added path_hash (2.0 snapshots were found
// by the pool's file name alone, so two pools of one name in different directories shared one).
struct manifest_record {
  object_header common;
  std::uint32_t page_bytes;
  std::uint32_t state;
  std::uint64_t pool_bytes;
  std::uint64_t seq;
  std::uint64_t journal_checksum;
  std::uint64_t table_checksum;
  std::uint64_t path_hash;
};
static_assert(sizeof(manifest_record) == 112);
inline constexpr object_kind kManifestKind{
    "snapshot manifest", {'G', 'P', 'M', 'K', 'S', 'N', 'A', 'P'}, 3, 0, sizeof(manifest_record)};

// The head of a journal file; object_bytes is the whole journal, uuid the pool's.
struct journal_header {
  object_header common;
  std::uint64_t seq;
  std::uint64_t entries;
  std::uint64_t page_bytes;
};
static_assert(sizeof(journal_header) == 88);
inline constexpr object_kind kJournalKind{
    "snapshot journal", {'G', 'P', 'M', 'K', 'J', 'R', 'N', 'L'}, 2, 0, sizeof(journal_header)};

struct journal_entry {
  std::uint64_t page;
  std::uint64_t checksum;
};
static_assert(sizeof(journal_entry) == 16);

}  // namespace gpm::format::snapshot
