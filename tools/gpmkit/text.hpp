// Renders a command's result (a json::value) as text for people, using the same names as the JSON
// keys so that the two outputs read alike: an object becomes "key: value" lines (underscores shown
// as spaces), a nested object an indented block, an array of objects a table, null "unknown",
// booleans yes/no, and a count of bytes (a key that is or ends in "bytes") gets a binary-unit
// reading beside it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "json.hpp"

namespace gpmkit {

void write_text(std::ostream& out, const json::value& v);

// `text` safe to print on a terminal: control characters (C0, DEL, C1), bytes that are not UTF-8
// and backslashes are written as \xNN, so a name holding an ANSI escape or a newline prints as
// what it is instead of acting on the terminal. Every string the text output and the messages on
// stderr show goes through it (JSON escapes its own).
std::string printable(std::string_view text);

// 1536 -> "1.5 KiB"; below 1 KiB, "N bytes".
std::string human_bytes(std::uint64_t bytes);

// Nanoseconds since the Unix epoch as ISO 8601 UTC ("2025-01-31T12:00:00Z").
std::string utc_time(std::uint64_t ns);

}  // namespace gpmkit
