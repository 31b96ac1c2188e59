// The GPHash header and state record: sealing, validation, crash-atomic state updates.
#include <gpm/hash/detail/format.hpp>

#include <cstddef>
#include <cstring>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpm::detail::hash {

namespace {
std::uint64_t header_checksum(const table_header& h) {
  return checksum64(&h, offsetof(table_header, checksum));
}
}  // namespace

std::uint64_t state_checksum(const table_state& s) {
  return checksum64(&s, offsetof(table_state, checksum)) ^ 0x5354415445ull;
}

void seal_header(table_header& h) { h.checksum = header_checksum(h); }

void validate_header(const table_header& h, std::uint32_t key_bytes, const std::string& what) {
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    throw_error(errc::corrupt, what +
                                   " is not a GPHash table (bad magic): it was overwritten or "
                                   "the name belongs to another object");
  }
  if (h.major != kMajor) {
    throw_error(errc::version, what + " has GPHash format version " + std::to_string(h.major) +
                                   "." + std::to_string(h.minor) + "; this gpmkit reads " +
                                   std::to_string(kMajor) + ".x: use a matching gpmkit");
  }
  if (h.checksum != header_checksum(h)) {
    throw_error(errc::corrupt, what +
                                   " has a corrupt header (checksum mismatch): restore the pool "
                                   "from a snapshot");
  }
  const bool geometry_ok =
      (h.key_bytes == 0 || h.key_bytes == 8 || h.key_bytes == 32) &&
      (h.key_bytes == 0) == (h.max_key_bytes != 0) && h.hash_count >= 1 && h.hash_count <= 4 &&
      h.level_count >= 1 && h.level_count <= 4 && h.slots_per_bucket >= 1 &&
      h.slots_per_bucket <= 32 && (h.slots_per_bucket & (h.slots_per_bucket - 1)) == 0 &&
      h.value_bytes >= 8 && h.value_bytes % 8 == 0 &&
      h.slot_bytes == (h.key_bytes == 32 ? 48u : 16u) && h.initial_top <= kMaxTop;
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
  persist(&slot, sizeof slot);
}

}  // namespace gpm::detail::hash
