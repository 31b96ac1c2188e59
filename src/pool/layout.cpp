// Pool on-media structures (see layout.hpp and format.hpp).
#include "layout.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/persist.hpp>

namespace gpm::detail {

namespace fmt = format::pool;

void findings::raise(const std::string& path) const {
  std::string msg = "pool " + path + ": " + problems.front().text;
  for (std::size_t i = 1; i < problems.size() && i < 8; ++i) msg += "; " + problems[i].text;
  if (problems.size() > 8) msg += "; and " + std::to_string(problems.size() - 8) + " more";
  throw_error(problems.front().code, msg);
}

const fmt::header& header_of(const char* base) {
  return *reinterpret_cast<const fmt::header*>(base + fmt::kHeaderOffset);
}

fmt::directory_entry* entries_of(char* base) {
  return reinterpret_cast<fmt::directory_entry*>(base + fmt::kDirectoryOffset);
}

const fmt::directory_entry* entries_of(const char* base) {
  return reinterpret_cast<const fmt::directory_entry*>(base + fmt::kDirectoryOffset);
}

std::uint64_t root_checksum(const fmt::root_record& r) {
  return checksum64(&r, offsetof(fmt::root_record, checksum), r.seq);
}

std::uint64_t entry_checksum(const fmt::directory_entry& e) {
  return checksum64(&e, offsetof(fmt::directory_entry, checksum), e.generation);
}

bool entry_is_zero(const fmt::directory_entry& e) {
  static const fmt::directory_entry zero{};
  return std::memcmp(&e, &zero, sizeof e) == 0;
}

std::uint64_t minimum_pool_bytes(std::uint32_t capacity) {
  return fmt::kDirectoryOffset + fmt::directory_bytes(capacity) + fmt::kPageBytes;
}

void format_pool(char* base, std::uint64_t bytes, std::string_view layout,
                 std::uint32_t directory_capacity) {
  fmt::header h{};
  h.common = format::make_header(fmt::kKind, bytes);
  std::memcpy(h.layout, layout.data(), layout.size());
  h.page_bytes = fmt::kPageBytes;
  h.directory_capacity = directory_capacity;
  h.root_offset = fmt::kRootOffset;
  h.directory_offset = fmt::kDirectoryOffset;
  h.heap_offset = fmt::kDirectoryOffset + fmt::directory_bytes(directory_capacity);
  h.heap_bytes = bytes - h.heap_offset;
  std::memcpy(base, &h, sizeof h);
  format::seal_header(base);

  fmt::root_record r{};
  r.seq = 1;
  r.flags = fmt::kFlagCleanShutdown;
  r.checksum = root_checksum(r);
  std::memcpy(base + fmt::kRootOffset, &r, sizeof r);
  persist_at("pool.create.header", base, fmt::kDirectoryOffset);
}

bool check_header(const char* base, std::uint64_t file_bytes, std::string_view layout,
                  findings& f) {
  if (auto problem = format::check_header(base, file_bytes, fmt::kKind)) {
    f.add(problem->code, std::move(problem->text));
    return false;
  }
  const fmt::header& h = header_of(base);
  if (h.layout[fmt::kLayoutMax] != '\0') {
    f.add(errc::corrupt, "the layout name is not terminated");
    return false;
  }
  if (h.layout[0] == '\0') {
    f.add(errc::corrupt, "the layout name is empty (create never writes one)");
    return false;
  }
  if (!layout.empty() && std::string_view(h.layout) != layout) {
    f.add(errc::layout_mismatch, "the pool holds layout \"" + std::string(h.layout) + "\", not \"" +
                                     std::string(layout) + "\"");
    return false;
  }
  const bool geometry_ok =
      h.page_bytes == fmt::kPageBytes && h.root_offset == fmt::kRootOffset &&
      h.directory_offset == fmt::kDirectoryOffset && h.directory_capacity > 0 &&
      h.heap_offset == fmt::kDirectoryOffset + fmt::directory_bytes(h.directory_capacity) &&
      h.heap_offset < file_bytes && h.heap_bytes == file_bytes - h.heap_offset &&
      file_bytes % fmt::kPageBytes == 0;
  if (!geometry_ok) {
    f.add(errc::corrupt,
          "the header's geometry (page, root, directory and heap offsets) is "
          "inconsistent");
    return false;
  }
  return true;
}

std::optional<root_state> read_root(const char* base, findings& f) {
  std::optional<root_state> best;
  bool slot_valid[2] = {false, false};
  for (int s = 0; s < 2; ++s) {
    fmt::root_record r;
    std::memcpy(&r, base + fmt::kRootOffset + s * fmt::kRootSlotBytes, sizeof r);
    static const fmt::root_record zero{};
    if (std::memcmp(&r, &zero, sizeof r) == 0) continue;  // never written
    if (r.checksum != root_checksum(r) || r.pending > fmt::op_free) continue;
    slot_valid[s] = true;
    if (!best || r.seq > best->record.seq) best = root_state{r, s};
  }
  if (!best) {
    f.add(errc::corrupt, "neither root record is valid (both fail their checksums)");
    return std::nullopt;
  }
  const int other = 1 - best->slot;
  fmt::root_record o;
  std::memcpy(&o, base + fmt::kRootOffset + other * fmt::kRootSlotBytes, sizeof o);
  static const fmt::root_record zero{};
  if (!slot_valid[other] && std::memcmp(&o, &zero, sizeof o) != 0) {
    f.notes.push_back("root record slot " + std::to_string(other) + " is corrupt; using slot " +
                      std::to_string(best->slot) + " (seq " + std::to_string(best->record.seq) +
                      ")");
  }
  return best;
}

void write_root(char* base, root_state& current, fmt::root_record next) {
  next.seq = current.record.seq + 1;
  next.checksum = root_checksum(next);
  const int slot = 1 - current.slot;
  char* dst = base + fmt::kRootOffset + slot * fmt::kRootSlotBytes;
  std::memcpy(dst, &next, sizeof next);
  persist_at("pool.root.write", dst, sizeof next);
  current = root_state{next, slot};
}

void check_root(const fmt::header& h, const fmt::root_record& root, findings& f) {
  const std::uint64_t bytes = h.common.object_bytes;
  if (root.user_root_offset > bytes || root.user_root_bytes > bytes - root.user_root_offset) {
    f.add(errc::corrupt, "the root record's application root (offset " +
                             std::to_string(root.user_root_offset) + ", " +
                             std::to_string(root.user_root_bytes) +
                             " bytes) lies outside the pool (" + std::to_string(bytes) + " bytes)");
  }
  if (root.pending != fmt::op_none && root.pending_entry >= h.directory_capacity) {
    f.add(errc::corrupt, "the root record's pending entry " + std::to_string(root.pending_entry) +
                             " is outside the directory (" + std::to_string(h.directory_capacity) +
                             " entries)");
  }
}

void check_directory(const char* base, const fmt::header& h, const fmt::root_record& root,
                     findings& f) {
  const fmt::directory_entry* entries = entries_of(base);
  struct extent {
    std::uint64_t begin, end;
    std::uint32_t index;
  };
  std::vector<extent> extents;
  std::set<std::string_view> names;
  for (std::uint32_t i = 0; i < h.directory_capacity; ++i) {
    const fmt::directory_entry& e = entries[i];
    if (entry_is_zero(e)) continue;
    const std::string where = "directory entry " + std::to_string(i);
    const bool valid = e.state == fmt::kEntryLive && e.checksum == entry_checksum(e);
    if (!valid && root.pending != fmt::op_none && root.pending_entry == i) {
      f.notes.push_back(where +
                        " was being written when the pool crashed; recovery will undo "
                        "that operation");
      continue;
    }
    if (!valid) {
      f.add(errc::corrupt, where + " is corrupt (state or checksum invalid)");
      continue;
    }
    if (std::memchr(e.name, '\0', sizeof e.name) == nullptr || e.name[0] == '\0') {
      f.add(errc::corrupt, where + " has an invalid name");
      continue;
    }
    const std::string_view name(e.name);
    if (!names.insert(name).second) {
      f.add(errc::corrupt, where + " repeats the name \"" + std::string(name) + "\"");
    }
    const bool aligned = e.alignment >= fmt::kMinAlignment &&
                         (e.alignment & (e.alignment - 1)) == 0 && e.offset % e.alignment == 0;
    const bool inside = e.offset >= h.heap_offset && e.extent >= e.bytes && e.extent > 0 &&
                        e.offset <= h.common.object_bytes &&
                        e.extent <= h.common.object_bytes - e.offset;
    if (!aligned || !inside) {
      f.add(errc::corrupt, where + " (\"" + std::string(name) +
                               "\") lies outside the heap or is "
                               "misaligned");
      continue;
    }
    extents.push_back({e.offset, e.offset + e.extent, i});
  }
  std::sort(extents.begin(), extents.end(),
            [](const extent& a, const extent& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].begin < extents[i - 1].end) {
      f.add(errc::corrupt, "directory entries " + std::to_string(extents[i - 1].index) + " and " +
                               std::to_string(extents[i].index) + " overlap in the heap");
    }
  }
}

}  // namespace gpm::detail
