// Text rendering of command results (see text.hpp).
#include "text.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

namespace gpmkit {

namespace {

std::string label(const std::string& key) {
  std::string s = key;
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

bool is_byte_count(const std::string& key) {
  return key == "bytes" || (key.size() > 6 && key.ends_with("_bytes"));
}

std::string scalar(const std::string& key, const json::value& v) {
  if (const bool* b = v.as<bool>()) return *b ? "yes" : "no";
  if (const std::int64_t* i = v.as<std::int64_t>()) return std::to_string(*i);
  if (const std::uint64_t* u = v.as<std::uint64_t>()) {
    std::string s = std::to_string(*u);
    if (is_byte_count(key) && *u >= 1024) s += " (" + human_bytes(*u) + ")";
    return s;
  }
  if (const double* d = v.as<double>()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", *d);
    return buf;
  }
  if (const std::string* s = v.as<std::string>()) return printable(*s);
  return "unknown";
}

void indent(std::ostream& out, int level) {
  for (int i = 0; i < level; ++i) out << "  ";
}

void write_object(std::ostream& out, const json::object& o, int level);

// An array of objects as a table whose columns are the first object's keys.
void write_table(std::ostream& out, const json::array& rows, int level) {
  const json::object* first = rows.front().as<json::object>();
  std::vector<std::string> keys;
  for (const auto& [k, v] : first->members()) keys.push_back(k);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width;
  for (const std::string& k : keys) width.push_back(label(k).size());
  for (const json::value& row : rows) {
    std::vector<std::string> line(keys.size());
    if (const json::object* o = row.as<json::object>()) {
      for (const auto& [k, v] : o->members()) {
        const auto at = std::find(keys.begin(), keys.end(), k);
        if (at == keys.end()) continue;
        const std::size_t c = static_cast<std::size_t>(at - keys.begin());
        // Table cells stay short: no binary-unit reading.
        line[c] = v.is_scalar() ? scalar("", v) : "...";
        width[c] = std::max(width[c], line[c].size());
      }
    }
    cells.push_back(std::move(line));
  }
  auto emit = [&](const std::vector<std::string>& line) {
    indent(out, level);
    for (std::size_t c = 0; c < line.size(); ++c) {
      out << line[c];
      if (c + 1 < line.size()) out << std::string(width[c] - line[c].size() + 2, ' ');
    }
    out << '\n';
  };
  std::vector<std::string> header;
  for (const std::string& k : keys) header.push_back(label(k));
  emit(header);
  for (const auto& line : cells) emit(line);
}

void write_member(std::ostream& out, const std::string& key, const json::value& v, int level,
                  std::size_t pad) {
  indent(out, level);
  const std::string l = label(key);
  if (v.is_scalar()) {
    out << l << ':' << std::string(pad - l.size() + 1, ' ') << scalar(key, v) << '\n';
    return;
  }
  if (const json::array* a = v.as<json::array>()) {
    if (a->empty()) {
      out << l << ':' << std::string(pad - l.size() + 1, ' ') << "none\n";
    } else if (a->front().as<json::object>()) {
      out << l << ":\n";
      write_table(out, *a, level + 1);
    } else {
      out << l << ":\n";
      for (const json::value& item : *a) {
        indent(out, level + 1);
        out << "- " << (item.is_scalar() ? scalar(key, item) : "...") << '\n';
      }
    }
    return;
  }
  out << l << ":\n";
  write_object(out, *v.as<json::object>(), level + 1);
}

void write_object(std::ostream& out, const json::object& o, int level) {
  std::size_t pad = 0;
  for (const auto& [k, v] : o.members()) pad = std::max(pad, label(k).size());
  for (const auto& [k, v] : o.members()) write_member(out, k, v, level, pad);
}

}  // namespace

void write_text(std::ostream& out, const json::value& v) {
  if (const json::object* o = v.as<json::object>()) {
    write_object(out, *o, 0);
  } else if (v.as<json::array>()) {
    write_member(out, "items", v, 0, 5);
  } else {
    out << scalar("", v) << '\n';
  }
}

std::string printable(std::string_view text) {
  std::string out;
  const auto escape = [&out](unsigned char b) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", b);
    out += buf;
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f || b == '\\') {
        escape(b);
      } else {
        out += static_cast<char>(b);
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, continuation bytes 10xxxxxx, and not a C1
    // control (U+0080..U+009F, lead byte 0xc2 then 0x80..0x9f). Anything else is escaped bytewise.
    const std::size_t n = b >= 0xc2 && b <= 0xdf   ? 2
                          : b >= 0xe0 && b <= 0xef ? 3
                          : b >= 0xf0 && b <= 0xf4 ? 4
                                                   : 0;
    bool ok = n != 0 && i + n <= text.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (ok && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) ok = false;
    if (ok) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      escape(b);
      ++i;
    }
  }
  return out;
}

std::string human_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double x = static_cast<double>(bytes);
  int u = 0;
  while (x >= 1024 && u < 6) {
    x /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, x < 10 ? "%.2f %s" : x < 100 ? "%.1f %s" : "%.0f %s", x, units[u]);
  return buf;
}

std::string utc_time(std::uint64_t ns) {
  const std::time_t s = static_cast<std::time_t>(ns / 1000000000ull);
  std::tm tm{};
  if (gmtime_r(&s, &tm) == nullptr) return "unknown";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpmkit
