// gpmkit: the command-line tool for gpmkit pools and for what a machine offers them. This file
// finds the command named on the command line, runs it, and turns every failure into one sentence
// on stderr and an exit code (command.hpp); the commands themselves live in system_info.cpp and
// pool_commands.cpp and ooc_commands.cpp.
#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/config.hpp>
#include <gpm/platform/error.hpp>

#include "args.hpp"
#include "command.hpp"
#include "text.hpp"

namespace gpmkit {

namespace {

std::vector<command> all_commands() {
  std::vector<command> all = system_info_commands();
  for (command& c : pool_commands()) all.push_back(std::move(c));
  for (command& c : ooc_commands()) all.push_back(std::move(c));
  return all;
}

// The list of commands whose names start with `prefix`, for `gpmkit --help` and `gpmkit pool`.
std::string overview(const std::vector<command>& commands, const std::string& prefix) {
  std::string s = "usage: gpmkit " +
                  (prefix.empty() ? std::string("COMMAND") : prefix + " SUBCOMMAND") +
                  " [ARGS] [options]\n\n";
  if (prefix.empty()) {
    s += "gpmkit inspects the machine, manages persistent memory pools and shows the state of "
         "files used out of core.\n\n";
  }
  s += "commands:\n";
  std::size_t width = 0;
  for (const command& c : commands) width = std::max(width, c.spec.name.size());
  for (const command& c : commands) {
    if (c.spec.name.rfind(prefix, 0) != 0) continue;
    s += "  " + c.spec.name + std::string(width - c.spec.name.size() + 2, ' ');
    const std::string& sum = c.spec.summary;
    const std::size_t end = sum.find(": ");
    s += (end == std::string::npos ? sum : sum.substr(0, end) + ".") + "\n";
  }
  s += "\n'gpmkit COMMAND --help' describes a command and its options.\n"
       "exit status: 0 success, 1 failure (or an inconsistent pool), 2 a wrong command line.\n";
  return s;
}

// Runs the command line `argv` (without the program name). `hint` receives the command's name
// for usage-error messages, `json` whether the parsed command line asked for --json.
int dispatch(const std::vector<std::string>& argv, std::string& hint, bool& json) {
  const std::vector<command> commands = all_commands();
  hint = "gpmkit --help";

  // Global options may precede the command.
  std::vector<std::string> leading;
  std::size_t i = 0;
  bool help = false;
  for (; i < argv.size() && !argv[i].empty() && argv[i][0] == '-' && argv[i] != "--"; ++i) {
    const std::string& a = argv[i];
    if (a == "--version") {
      std::cout << "gpmkit " << GPM_VERSION_STRING << " (" << GPM_BACKEND_NAME << " backend)\n";
      return kExitOk;
    }
    if (a == "--help" || a == "-h") {
      help = true;
      continue;
    }
    const std::size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const option_spec* o = a.rfind("--", 0) == 0 ? find_global_option(name) : nullptr;
    if (o == nullptr) {
      throw usage_error("unknown option " + a +
                        " before the command (a command's own options "
                        "follow the command)");
    }
    leading.push_back(a);
    if (!o->value_name.empty() && eq == std::string::npos && i + 1 < argv.size()) {
      leading.push_back(argv[++i]);
    }
  }

  std::vector<std::string> words;
  if (i < argv.size() && argv[i] == "help") {  // "gpmkit help pool create"
    help = true;
    ++i;
  }
  if (i < argv.size()) words.push_back(argv[i++]);
  const bool family = !words.empty() && (words[0] == "pool" || words[0] == "ooc");
  if (family && i < argv.size() && !argv[i].empty() && argv[i][0] != '-') {
    words.push_back(argv[i++]);
  }
  std::string name;
  for (const std::string& w : words) name += (name.empty() ? "" : " ") + w;

  const command* cmd = nullptr;
  for (const command& c : commands) {
    if (c.spec.name == name) cmd = &c;
  }
  if (cmd == nullptr) {
    for (std::size_t k = i; k < argv.size(); ++k)
      help = help || argv[k] == "--help" || argv[k] == "-h";
    if (name.empty() || name == "pool" || name == "ooc") {
      if (help) {
        std::cout << overview(commands, name);
        return kExitOk;
      }
      std::cerr << overview(commands, name);
      throw usage_error(name.empty()    ? "no command given"
                        : name == "ooc" ? "gpmkit ooc needs a subcommand (stat, recover)"
                                        : "gpmkit pool needs a subcommand (create, info, ls, "
                                          "check, snapshot, restore, rm)");
    }
    throw usage_error("unknown command \"" + name + "\"");
  }
  hint = "gpmkit " + cmd->spec.name + " --help";

  std::vector<std::string> rest = leading;
  rest.insert(rest.end(), argv.begin() + static_cast<std::ptrdiff_t>(i), argv.end());
  if (help) rest.push_back("--help");
  const parsed_args args = parse(cmd->spec, rest);
  if (args.flag("help")) {
    std::cout << help_text(cmd->spec);
    return kExitOk;
  }
  context ctx;
  ctx.options.pm_dir = args.value("pm-dir").value_or("");
  ctx.options.snapshot_dir = args.value("snapshot-dir").value_or("");
  ctx.json = json = args.flag("json");
  ctx.out = &std::cout;
  ctx.err = &std::cerr;
  return cmd->run(args, ctx);
}

// Reports a failure: one line on stderr and, with --json, {"error": {"code", "message"}} on
// stdout, so that stdout parses whatever happened. `code` is a gpm::errc name, "usage" or
// "failed".
int fail(bool json, std::string_view code, const std::string& message, int exit_code) {
  std::cerr << "gpmkit: " << printable(message) << '\n';
  if (json) {
    json::object detail;
    detail.add("code", code);
    detail.add("message", message);
    json::object o;
    o.add("error", std::move(detail));
    json::write(std::cout, o);
    std::cout << '\n';
  }
  return exit_code;
}

// Whether the command line asks for --json (before "--"), for failures that come before it is
// parsed.
bool mentions_json(const std::vector<std::string>& argv) {
  const auto end = std::find(argv.begin(), argv.end(), "--");
  return std::find(argv.begin(), end, "--json") != end;
}

}  // namespace

}  // namespace gpmkit

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::string hint;
  bool json = gpmkit::mentions_json(args);
  try {
    return gpmkit::dispatch(args, hint, json);
  } catch (const gpmkit::usage_error& e) {
    return gpmkit::fail(json, "usage", std::string(e.what()) + " (see " + hint + ")",
                        gpmkit::kExitUsage);
  } catch (const gpm::error& e) {
    return gpmkit::fail(json, gpm::to_string(e.code()), e.what(), gpmkit::kExitFailure);
  } catch (const std::exception& e) {  // command_failed among them
    return gpmkit::fail(json, "failed", e.what(), gpmkit::kExitFailure);
  }
}
