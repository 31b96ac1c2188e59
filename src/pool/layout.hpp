// Reading, writing and validating a pool's on-media structures (format.hpp) in a mapped image.
// Validation collects every problem it finds, with an error code and a sentence, so that open()
// can refuse a pool with a precise message and check() can list them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/platform/error.hpp>
#include <gpm/pool/format.hpp>
#include <gpm/pool/object_header.hpp>

namespace gpm::detail {

struct problem {
  errc code;
  std::string text;
};

struct findings {
  std::vector<problem> problems;
  std::vector<std::string> notes;

  void add(errc code, std::string text) { problems.push_back({code, std::move(text)}); }
  bool ok() const { return problems.empty(); }
  // Throws the first problem's code with every problem in the message.
  [[noreturn]] void raise(const std::string& path) const;
};

std::uint64_t root_checksum(const format::pool::root_record& r);
std::uint64_t entry_checksum(const format::pool::directory_entry& e);
bool entry_is_zero(const format::pool::directory_entry& e);

// Lays out a new pool's header and first root record in a zero-filled image.
void format_pool(char* base, std::uint64_t bytes, std::string_view layout,
                 std::uint32_t directory_capacity);

// The smallest pool that holds a directory of `capacity` entries and one page of heap.
std::uint64_t minimum_pool_bytes(std::uint32_t capacity);

// Validates the header page (the common object header, then the pool's own fields) against the
// file's size and (unless empty) the expected layout.
bool check_header(const char* base, std::uint64_t file_bytes, std::string_view layout, findings& f);

struct root_state {
  format::pool::root_record record;
  int slot;  // 0 or 1: where the newest valid record is
};

// The newest valid root record, noting a corrupt or stale other slot.
std::optional<root_state> read_root(const char* base, findings& f);

// Writes `next` (its seq is set to current.seq + 1) into the slot not holding `current`,
// persists it, and makes it current.
void write_root(char* base, root_state& current, format::pool::root_record next);

// Validates the root record's fields against the header: the application root inside the pool,
// a pending operation's entry inside the directory.
void check_root(const format::pool::header& h, const format::pool::root_record& root, findings& f);

// Validates every directory entry: zero or live with a valid checksum, a terminated unique name,
// inside the heap, aligned, not overlapping another. The entry of a directory operation that a
// crash interrupted (`root.pending`) may be torn: recovery resolves it, so it is not a problem.
void check_directory(const char* base, const format::pool::header& h,
                     const format::pool::root_record& root, findings& f);

const format::pool::header& header_of(const char* base);
format::pool::directory_entry* entries_of(char* base);
const format::pool::directory_entry* entries_of(const char* base);

}  // namespace gpm::detail
