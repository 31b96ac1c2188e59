// Command-line parsing for the gpmkit CLI: each command declares its positional arguments and
// options once (command_spec); the same declaration drives parsing, validation and --help. A
// mistake in the command line is a usage_error (exit 2), never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpmkit {

// How gpmkit was invoked is wrong; the message says what and main() adds where to find --help.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct option_spec {
  std::string name;        // without the leading "--"
  std::string value_name;  // "" for a flag, else the name of its value in --help ("BYTES")
  std::string help;
  bool required = false;  // parse() fails without it
};

struct command_spec {
  std::string name;                      // the words that select it: "pool create"
  std::vector<std::string> positionals;  // required, in order: "PATH"
  std::vector<option_spec> options;      // its own; the global options come on top
  std::string summary;                   // one line for the command list
  std::string details;                   // text after the option list (may be empty)
};

// Options every command accepts (--pm-dir, --snapshot-dir, --json, --help).
const std::vector<option_spec>& global_options();
const option_spec* find_global_option(std::string_view name);

class parsed_args {
 public:
  const std::vector<std::string>& positionals() const noexcept { return positionals_; }
  bool flag(std::string_view name) const { return flags_.count(std::string(name)) != 0; }
  std::optional<std::string> value(std::string_view name) const;

 private:
  friend parsed_args parse(const command_spec&, const std::vector<std::string>&);
  std::vector<std::string> positionals_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
};

// Parses the arguments that follow the command words. Options may come before or after the
// positional arguments, as "--name value" or "--name=value"; "--" ends the options. Unless --help
// is given, every positional and required option must be present.
parsed_args parse(const command_spec& spec, const std::vector<std::string>& args);

// The --help text of a command.
std::string help_text(const command_spec& spec);

// A size in bytes: digits with an optional binary suffix (K/KiB, M/MiB, G/GiB, T/TiB, B; case does
// not matter). Zero, fractions, decimal units (MB) and overflow are usage errors naming `option`.
std::uint64_t parse_size(std::string_view text, std::string_view option);

// A count from 1 to 2^32 - 1.
std::uint32_t parse_count(std::string_view text, std::string_view option);

}  // namespace gpmkit
