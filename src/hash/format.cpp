// The GPHash header and state record: validating the header (the common object header, then the
// table's geometry), crash-atomic state updates.
#include <gpm/hash/detail/format.hpp>

#include <cstddef>
#include <cstring>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpm::format::hash {

std::uint64_t state_checksum(const table_state& s) {
  return checksum64(&s, offsetof(table_state, checksum)) ^ 0x5354415445ull;
}

void check_table_geometry(const void* record, std::uint32_t key_bytes, const std::string& what) {
  table_header h;
  std::memcpy(&h, record, sizeof h);
  const bool geometry_ok =
      (h.key_bytes == 0 || h.key_bytes == 8 || h.key_bytes == 32) &&
      (h.key_bytes == 0) == (h.max_key_bytes != 0) && h.hash_count >= 1 && h.hash_count <= 4 &&
      h.level_count >= 1 && h.level_count <= 4 && h.slots_per_bucket >= 1 &&
      h.slots_per_bucket <= 32 && (h.slots_per_bucket & (h.slots_per_bucket - 1)) == 0 &&
      h.value_bytes >= 8 && h.value_bytes % 8 == 0 && h.value_bytes <= kMaxValueBytes &&
      h.max_key_bytes <= kMaxKeyBytes && h.slot_bytes == (h.key_bytes == 32 ? 48u : 16u) &&
      h.initial_top <= kMaxTop;
  if (!geometry_ok) {
    throw_error(errc::corrupt, what +
                                   " has an impossible geometry in its header: restore the pool "
                                   "from a snapshot");
  }
  if (h.key_bytes != key_bytes) {
    const auto kind = [](std::uint32_t b) {
      return b == 0 ? std::string("variable-length") : std::to_string(b) + "-byte";
    };
    throw_error(errc::invalid_argument,
                what + " holds " + kind(h.key_bytes) + " keys but was opened as a table of " +
                    kind(key_bytes) + " keys: open it with the key type it was created with");
  }
}

table_state read_state(const table_record& r, const std::string& what) {
  const table_state* best = nullptr;
  for (const table_state& s : r.state) {
    if (s.checksum == state_checksum(s) && s.top <= kMaxTop && s.segments <= kStateSegments &&
        (best == nullptr || s.seq > best->seq)) {
      best = &s;
    }
  }
  if (best == nullptr) {
    throw_error(errc::corrupt, what +
                                   " has no valid state record (both copies fail their "
                                   "checksum): restore the pool from a snapshot");
  }
  return *best;
}

void write_state(table_record& r, table_state s) {
  const table_state current = read_state(r, "GPHash table");
  s.seq = current.seq + 1;
  s.checksum = state_checksum(s);
  table_state& slot = r.state[s.seq % 2];
  slot = s;
  persist_at("gphash.state.write", &slot, sizeof slot);
}

}  // namespace gpm::format::hash
