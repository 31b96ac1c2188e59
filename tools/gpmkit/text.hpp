// Renders a command's result (a json::value) as text for people, using the same names as the JSON
// keys so that the two outputs read alike: an object becomes "key: value" lines (underscores shown
// as spaces), a nested object an indented block, an array of objects a table, null "unknown",
// booleans yes/no, and a count of bytes (a key that is or ends in "bytes") gets a binary-unit
// reading beside it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "json.hpp"

namespace gpmkit {

void write_text(std::ostream& out, const json::value& v);

// 1536 -> "1.5 KiB"; below 1 KiB, "N bytes".
std::string human_bytes(std::uint64_t bytes);

// Nanoseconds since the Unix epoch as ISO 8601 UTC ("2025-01-31T12:00:00Z").
std::string utc_time(std::uint64_t ns);

}  // namespace gpmkit
