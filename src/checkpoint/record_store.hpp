// The checkpoint's object in the pool, "cp.<name>" (format.hpp): its header, its chunk table and
// its two commit records. The record in force is the valid one with the higher seq; the other,
// if valid, is the previous state (used only to repair a corrupt copy at restore). Knows nothing
// of chunks' buffers or of the GPU. Internal to src/checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gpm/checkpoint/format.hpp>

namespace gpm::checkpoint_detail {

namespace fmt = format::checkpoint;

// Whether the n bytes at p are all zero: a never-written record or chunk table entry.
bool all_zero(const void* p, std::size_t n);

struct record_store {
  char* object = nullptr;  // the host's view of "cp.<name>"
  const fmt::header* header = nullptr;
  std::string who;          // "checkpoint "<name>" in <pool>", for messages
  std::string object_name;  // "cp.<name>"
  std::uint32_t in_force = 0;
  std::vector<fmt::record_entry> current;   // in_force's entries
  std::vector<fmt::record_entry> previous;  // the other record's entries, if valid
  bool previous_valid = false;
  std::uint64_t seq = 0;

  fmt::chunk_entry* table() const {
    return reinterpret_cast<fmt::chunk_entry*>(object + header->table_offset);
  }
  char* record_at(std::uint32_t r) const {
    return object + header->records_offset + r * header->record_bytes;
  }
  std::uint32_t max_chunks() const { return header->max_chunks; }

  std::uint64_t record_checksum(const char* rec) const;

  // The entries of record r if it is valid.
  std::optional<std::pair<std::uint64_t, std::vector<fmt::record_entry>>> read_record(
      std::uint32_t r) const;

  void load();

  // Writes `next` into the record not in force and persists it: the atomic flip.
  void commit(const std::vector<fmt::record_entry>& next, std::uint64_t next_seq);
};

}  // namespace gpm::checkpoint_detail
