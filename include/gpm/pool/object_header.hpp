// The one header every gpmkit on-media structure starts with (the pool file, a GPHash table, a
// log, a checkpoint, a snapshot manifest, ...), and the one validator that checks it. Like PMDK's
// pool_hdr: a module's header is `{ gpm::format::object_header common; <its own fields> }`, so
// magic, version, sizes, identity and checksum are written, checked and reported the same way
// everywhere (docs/format.md, "Object header"). Host code only; this layer knows no module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <gpm/platform/error.hpp>

namespace gpm::format {

// 64 bytes at offset 0 of every on-media structure. Little-endian, like all gpmkit formats.
struct object_header {
  char magic[8];                    // which kind of structure: "GPMKPOOL", "GPMHASH\0", ...
  std::uint16_t major;              // an incompatible change bumps this: readers refuse others
  std::uint16_t minor;              // a compatible addition bumps this
  std::uint32_t header_bytes;       // bytes the checksum covers, from the start of this header
  std::uint64_t object_bytes;       // bytes of the whole structure (the file, the pool object)
  std::uint64_t incompat_features;  // bits a reader must understand (object_kind::known_incompat)
  std::uint8_t uuid[16];            // random (RFC 4122 version 4): this structure's identity
  std::uint64_t created_ns;         // CLOCK_REALTIME nanoseconds when it was written
  std::uint64_t checksum;           // checksum64 of header_bytes bytes, this field read as zero
};
static_assert(sizeof(object_header) == 64);
static_assert(offsetof(object_header, major) == 8 && offsetof(object_header, checksum) == 56);

// What a reader of one kind of structure expects. A module defines one per structure.
struct object_kind {
  std::string_view noun;  // for messages: "gpmkit pool", "GPHash table", "gpmkit log"
  char magic[8];          // its magic bytes
  std::uint16_t major;    // the format version this gpmkit writes, and the only major it reads
  std::uint16_t minor;
  std::uint32_t header_bytes;  // its whole header (common part and own fields) or page
  // The incompatible feature bits this gpmkit understands in such a structure; a header with
  // others is refused (errc::version), so an older reader never misreads a newer layout.
  std::uint64_t known_incompat = 0;
};

// A new structure's common header: kind's magic and version, a fresh uuid, the time now. The
// checksum is left zero: seal_header() computes it once the module's own fields are filled in.
object_header make_header(const object_kind& kind, std::uint64_t object_bytes);

// checksum64 over `header_bytes` bytes at `header` with the checksum field read as zero.
std::uint64_t header_checksum(const void* header, std::uint32_t header_bytes);
// Stores the checksum of the header at `header`, over its own header_bytes.
void seal_header(void* header);

// What is wrong with a header, as a clause that follows the structure's name
// ("pool /dev/shm/x: " + text): what is wrong, then what to do.
struct header_problem {
  errc code;
  std::string text;
};

// Checks the header at `header`, of which `available` bytes can be read (the file's size, the
// pool object's size), against `kind`, in an order that makes each message as specific as it can
// be: too short to hold the kind's whole header (corrupt), no magic at all (corrupt: creation
// interrupted), another magic (corrupt: not this kind of structure), another major version
// (version: too new or too old; checked before the checksum because another version may lay out or
// checksum its header differently), another header size (corrupt), a checksum mismatch (corrupt),
// unknown incompatible features (version), a structure size other than `available` (corrupt:
// truncated or extended). Returns the first problem, or nothing when the header is sound.
std::optional<header_problem> check_header(const void* header, std::uint64_t available,
                                           const object_kind& kind);

// check_header(), throwing the problem as gpm::error "<what>: <text>"; `what` names the structure
// ("GPHash table 'kv' in pool /dev/shm/gpmkit/p").
void validate_header(const void* header, std::uint64_t available, const object_kind& kind,
                     std::string_view what);

// "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".
std::string uuid_string(const std::uint8_t (&uuid)[16]);

}  // namespace gpm::format
