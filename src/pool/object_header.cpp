// The common on-media header: creating, sealing and validating it (see object_header.hpp).
#include <gpm/pool/object_header.hpp>

#include <sys/random.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include <gpm/platform/checksum.hpp>

namespace gpm::format {

namespace {

constexpr std::size_t kChecksumAt = offsetof(object_header, checksum);

std::string version_string(std::uint16_t major, std::uint16_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Magic bytes for a message: quoted text when they are printable characters other than quote and
// backslash (then zero bytes as padding), else the eight bytes in hex. No escapes: front ends that
// escape what they print (the gpmkit CLI escapes backslashes) would escape them again.
std::string magic_string(const char (&magic)[8]) {
  std::size_t n = sizeof magic;
  while (n > 0 && magic[n - 1] == '\0') --n;
  bool text = n > 0;
  for (std::size_t i = 0; i < n; ++i) {
    text = text && magic[i] >= 0x20 && magic[i] < 0x7f && magic[i] != '"' && magic[i] != '\\';
  }
  if (text) return "\"" + std::string(magic, n) + "\"";
  std::string out = "bytes";
  for (const char c : magic) {
    char buf[4];
    std::snprintf(buf, sizeof buf, " %02x", static_cast<unsigned char>(c));
    out += buf;
  }
  return out;
}

std::string too_short(std::uint64_t available, std::uint64_t needed, const object_kind& k) {
  return std::to_string(available) + " bytes, too short to hold a " + std::string(k.noun) +
         " header (" + std::to_string(needed) + " bytes): truncated, or not a " +
         std::string(k.noun);
}

std::string restore_or_recreate(const object_kind& k) {
  return "restore the pool from its snapshot (gpmkit pool restore), or create the " +
         std::string(k.noun) + " again";
}

}  // namespace

object_header make_header(const object_kind& kind, std::uint64_t object_bytes) {
  object_header h{};
  std::memcpy(h.magic, kind.magic, sizeof h.magic);
  h.major = kind.major;
  h.minor = kind.minor;
  h.header_bytes = kind.header_bytes;
  h.object_bytes = object_bytes;
  if (getrandom(h.uuid, sizeof h.uuid, 0) != static_cast<ssize_t>(sizeof h.uuid)) {
    // No entropy source: the clock still tells structures apart, which is all the uuid is for.
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    std::memcpy(h.uuid, &now, sizeof now);
  }
  h.uuid[6] = static_cast<std::uint8_t>((h.uuid[6] & 0x0f) | 0x40);  // RFC 4122 version 4
  h.uuid[8] = static_cast<std::uint8_t>((h.uuid[8] & 0x3f) | 0x80);
  h.created_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  return h;
}

std::uint64_t header_checksum(const void* header, std::uint32_t header_bytes) {
  const auto* p = static_cast<const char*>(header);
  const std::uint64_t zero = 0;
  std::uint64_t c = checksum64(p, kChecksumAt);
  c = checksum64(&zero, sizeof zero, c);
  return checksum64(p + kChecksumAt + 8, header_bytes - kChecksumAt - 8, c);
}

void seal_header(void* header) {
  auto* h = static_cast<object_header*>(header);
  h->checksum = header_checksum(header, h->header_bytes);
}

std::optional<header_problem> check_header(const void* header, std::uint64_t available,
                                           const object_kind& k) {
  const std::string noun(k.noun);
  // A structure smaller than its kind's whole header cannot be one, whatever its bytes say.
  if (available < sizeof(object_header) || available < k.header_bytes) {
    if (available == 0) {
      return header_problem{errc::corrupt,
                            "empty (0 bytes): not a " + noun + ", or its creation was interrupted"};
    }
    return header_problem{errc::corrupt, too_short(available, k.header_bytes, k)};
  }
  object_header h;
  std::memcpy(&h, header, sizeof h);
  static constexpr char kNoMagic[8] = {};
  if (std::memcmp(h.magic, kNoMagic, sizeof h.magic) == 0) {
    return header_problem{errc::corrupt,
                          "no header (its magic is zero): its creation was interrupted by a crash "
                          "before the header was written, or it is not a " +
                              noun + "; remove it and create it again"};
  }
  if (std::memcmp(h.magic, k.magic, sizeof h.magic) != 0) {
    return header_problem{errc::corrupt,
                          "not a " + noun + " (its magic is " + magic_string(h.magic) + ", not " +
                              magic_string(k.magic) +
                              "): the name belongs to another kind of structure, or it was "
                              "overwritten"};
  }
  const std::string found = "written in format version " + version_string(h.major, h.minor);
  const std::string reads = std::to_string(k.major) + ".x";
  if (h.major > k.major) {
    return header_problem{errc::version,
                          found + ", newer than this gpmkit reads (" + reads + "): upgrade gpmkit"};
  }
  if (h.major < k.major) {
    return header_problem{errc::version, found + ", older than this gpmkit reads (" + reads +
                                             "): open it with the gpmkit release that wrote "
                                             "it, or create it again with this one"};
  }
  if (h.header_bytes != k.header_bytes) {
    return header_problem{errc::corrupt, "the header says it is " + std::to_string(h.header_bytes) +
                                             " bytes, but a " + noun + " header of version " +
                                             reads + " is " + std::to_string(k.header_bytes) +
                                             ": the header is corrupt; " + restore_or_recreate(k)};
  }
  if (h.checksum != header_checksum(header, h.header_bytes)) {
    return header_problem{errc::corrupt,
                          "the header checksum does not match: the header is "
                          "corrupt; " +
                              restore_or_recreate(k)};
  }
  if (const std::uint64_t unknown = h.incompat_features & ~k.known_incompat; unknown != 0) {
    char bits[24];
    std::snprintf(bits, sizeof bits, "%#llx", static_cast<unsigned long long>(unknown));
    return header_problem{errc::version, std::string("it uses features this gpmkit does not know "
                                                     "(incompatible feature bits ") +
                                             bits + "): upgrade gpmkit"};
  }
  if (h.object_bytes != available) {
    return header_problem{errc::corrupt,
                          "the header says the " + noun + " is " + std::to_string(h.object_bytes) +
                              " bytes, but " + std::to_string(available) + " are there" +
                              (available < h.object_bytes ? ": truncated" : ": extended") + "; " +
                              restore_or_recreate(k)};
  }
  return std::nullopt;
}

void validate_header(const void* header, std::uint64_t available, const object_kind& kind,
                     std::string_view what) {
  if (auto p = check_header(header, available, kind)) {
    throw_error(p->code, std::string(what) + ": " + p->text);
  }
}

std::string uuid_string(const std::uint8_t (&u)[16]) {
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

}  // namespace gpm::format
