// Command-line parsing (see args.hpp).
#include "args.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace gpmkit {

const std::vector<option_spec>& global_options() {
  static const std::vector<option_spec> options = {
      {"pm-dir", "DIR",
       "directory of pools named without a '/' (default: $GPMKIT_PM_DIR, else /dev/shm/gpmkit)"},
      {"snapshot-dir", "DIR",
       "directory of pool snapshots (default: $GPMKIT_SNAPSHOT_DIR, else /var/tmp/gpmkit)"},
      {"json", "", "print the result as JSON (messages and notes stay on stderr)"},
      {"help", "", "show this help and exit"},
  };
  return options;
}

const option_spec* find_global_option(std::string_view name) {
  for (const option_spec& o : global_options()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::optional<std::string> parsed_args::value(std::string_view name) const {
  const auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

namespace {

const option_spec* find_option(const command_spec& spec, std::string_view name) {
  for (const option_spec& o : spec.options) {
    if (o.name == name) return &o;
  }
  return find_global_option(name);
}

}  // namespace

parsed_args parse(const command_spec& spec, const std::vector<std::string>& args) {
  parsed_args out;
  const std::string cmd = "gpmkit " + spec.name;
  bool options_done = false;
  std::vector<std::string> positionals;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a == "-" || a.empty() || a[0] != '-') {
      positionals.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "-h") {
      out.flags_.insert("help");
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      throw usage_error("unknown option " + a + " for " + cmd + " (options start with --)");
    }
    const std::size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const option_spec* o = find_option(spec, name);
    if (o == nullptr) throw usage_error("unknown option --" + name + " for " + cmd);
    if (o->value_name.empty()) {
      if (eq != std::string::npos) throw usage_error("option --" + name + " takes no value");
      out.flags_.insert(name);
      continue;
    }
    std::string v;
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      v = args[++i];
    } else {
      throw usage_error("option --" + name + " needs a value (--" + name + " " + o->value_name +
                        ")");
    }
    if (v.empty()) throw usage_error("option --" + name + " has an empty value");
    if (!out.values_.emplace(name, v).second) {
      throw usage_error("option --" + name + " is given more than once");
    }
  }
  if (!out.flags_.count("help")) {
    if (positionals.size() < spec.positionals.size()) {
      throw usage_error(cmd + " needs " + spec.positionals[positionals.size()]);
    }
    if (positionals.size() > spec.positionals.size()) {
      throw usage_error("unexpected argument \"" + positionals[spec.positionals.size()] +
                        "\" for " + cmd);
    }
    for (const option_spec& o : spec.options) {
      if (o.required && !out.values_.count(o.name)) {
        throw usage_error(cmd + " needs --" + o.name + " " + o.value_name);
      }
    }
  }
  out.positionals_ = std::move(positionals);
  return out;
}

std::string help_text(const command_spec& spec) {
  std::string s = "usage: gpmkit " + spec.name;
  for (const std::string& p : spec.positionals) s += " " + p;
  for (const option_spec& o : spec.options) {
    if (o.required) s += " --" + o.name + " " + o.value_name;
  }
  s += " [options]";
  s += "\n\n" + spec.summary + "\n";
  auto list = [&](const char* title, const std::vector<option_spec>& options) {
    std::size_t width = 0;
    auto head = [](const option_spec& o) {
      return "--" + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
    };
    for (const option_spec& o : options) width = std::max(width, head(o).size());
    s += std::string("\n") + title + ":\n";
    for (const option_spec& o : options) {
      const std::string h = head(o);
      s += "  " + h + std::string(width - h.size() + 2, ' ') + o.help + "\n";
    }
  };
  if (!spec.options.empty()) list("options", spec.options);
  list("global options", global_options());
  if (!spec.details.empty()) s += "\n" + spec.details + "\n";
  return s;
}

std::uint64_t parse_size(std::string_view text, std::string_view option) {
  const std::string opt(option);
  const std::string shown(text);
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) {
    throw usage_error(opt + " " + shown +
                      " is not a size: give a whole number of bytes, "
                      "optionally with a suffix K, M, G or T (KiB, MiB, GiB, TiB), e.g. 64MiB");
  }
  std::uint64_t n = 0;
  const auto r = std::from_chars(text.data(), text.data() + digits, n);
  if (r.ec != std::errc()) throw usage_error(opt + " " + shown + " is too large");
  std::string suffix(text.substr(digits));
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  struct unit {
    const char* a;
    const char* b;
    int shift;
  };
  static const unit units[] = {
      {"", "b", 0}, {"k", "kib", 10}, {"m", "mib", 20}, {"g", "gib", 30}, {"t", "tib", 40}};
  int shift = -1;
  for (const unit& u : units) {
    if (suffix == u.a || suffix == u.b) shift = u.shift;
  }
  if (shift < 0) {
    std::string hint;
    if (suffix == "kb" || suffix == "mb" || suffix == "gb" || suffix == "tb") {
      hint = " (gpmkit uses binary units: write " +
             std::string(1, static_cast<char>(std::toupper(suffix[0]))) + "iB)";
    } else if (!suffix.empty() && suffix[0] == '.') {
      hint = " (fractions are not accepted: use a smaller unit)";
    }
    throw usage_error(opt + " " + shown + " has an unknown suffix \"" +
                      std::string(text.substr(digits)) + "\"" + hint +
                      "; use K, M, G or T (KiB, MiB, GiB, TiB) or none for bytes");
  }
  if (n > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    throw usage_error(opt + " " + shown + " is too large");
  }
  n <<= shift;
  if (n == 0) throw usage_error(opt + " must be greater than 0");
  return n;
}

std::uint32_t parse_count(std::string_view text, std::string_view option) {
  const std::string opt(option);
  std::uint64_t n = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    throw usage_error(opt + " " + std::string(text) + " is not a whole number");
  }
  if (n == 0 || n > std::numeric_limits<std::uint32_t>::max()) {
    throw usage_error(opt + " must be from 1 to " +
                      std::to_string(std::numeric_limits<std::uint32_t>::max()));
  }
  return static_cast<std::uint32_t>(n);
}

}  // namespace gpmkit
