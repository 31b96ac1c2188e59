// What every gpmkit command is: its declaration (args.hpp) and a function that runs it with the
// settings the global options give. A command writes its result through emit(), which prints text
// or, with --json, JSON; it reports failure by throwing (gpm::error, usage_error, command_failed)
// or by returning a non-zero exit code. main.cpp owns dispatch and turns exceptions into messages.
#pragma once

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpm/pool/pool.hpp>

#include "args.hpp"
#include "json.hpp"

namespace gpmkit {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation failed, or a checked pool is inconsistent
inline constexpr int kExitUsage = 2;    // the command line is wrong

// A command could not do what was asked; the message says why and what to do (exit 1).
class command_failed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct context {
  gpm::pool_options options;  // pm_dir and snapshot_dir from --pm-dir / --snapshot-dir
  bool json = false;          // --json
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

// Prints a command's result as text, or as JSON with --json.
void emit(const context& ctx, const json::value& result);

// Prints "gpmkit: note: <text>" on stderr (in JSON mode too: stdout stays parseable).
void note(const context& ctx, const std::string& text);

struct command {
  command_spec spec;
  int (*run)(const parsed_args& args, context& ctx);
};

// The commands, by concern: `info` (system_info.cpp), `pool ...` (pool_commands.cpp) and
// `ooc ...` (ooc_commands.cpp).
std::vector<command> system_info_commands();
std::vector<command> pool_commands();
std::vector<command> ooc_commands();

}  // namespace gpmkit
