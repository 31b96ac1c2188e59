// gpmkit's one error type for host APIs: a code a program can branch on and a sentence a person
// can act on (which file, which limit, what to do). Library code reports failures only by
// throwing gpm::error; it never exits or aborts the process.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpm {

enum class errc {
  invalid_argument,  // a parameter is out of range or inconsistent
  out_of_memory,     // host, device or pool memory is exhausted
  cuda,              // the CUDA runtime (or the host emulator) reported an error
  io,                // a file system call failed
  corrupt,           // persistent data failed validation (checksum, magic, sizes)
  version,           // persistent data was written by an incompatible format version
  layout_mismatch,   // persistent data holds another layout than the one asked for
  busy,              // another process holds the resource
  not_found,         // a named file or object does not exist
  already_exists,    // a named file or object exists already
  unsupported,       // the platform cannot do what was asked
  no_device,         // no GPU is present and the operation needs one
};

// A stable, lower-case name for a code ("invalid_argument", ...), used in messages and JSON.
std::string_view to_string(errc code) noexcept;

class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message);
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

[[noreturn]] void throw_error(errc code, const std::string& message);

// Throws errc::invalid_argument with `message` unless `condition` holds.
inline void require(bool condition, std::string_view message) {
  if (!condition) throw_error(errc::invalid_argument, std::string(message));
}

}  // namespace gpm
