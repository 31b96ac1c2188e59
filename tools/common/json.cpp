// The tools' JSON writer (see json.hpp).
#include "json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace gpmkit::json {

object& object::add(std::string key, value v) {
  members_.emplace_back(std::move(key), std::move(v));
  return *this;
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not valid.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t min = 0;
  if (b < 0x80) return 1;
  if ((b & 0xe0) == 0xc0) {
    n = 2;
    min = 0x80;
  } else if ((b & 0xf0) == 0xe0) {
    n = 3;
    min = 0x800;
  } else if ((b & 0xf8) == 0xf0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  std::uint32_t cp = b & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (c & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Indented output starts each member on a new line; compact output (indent < 0) never does.
void newline(std::ostream& out, int indent) {
  if (indent < 0) return;
  out << '\n';
  for (int i = 0; i < indent; ++i) out << "  ";
}

int deeper(int indent) { return indent < 0 ? indent : indent + 1; }

}  // namespace

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
    ++i;
  }
  out += '"';
  return out;
}

void write(std::ostream& out, const value& v, int indent) {
  const value::storage& s = v.get();
  if (std::holds_alternative<std::nullptr_t>(s)) {
    out << "null";
  } else if (const bool* b = v.as<bool>()) {
    out << (*b ? "true" : "false");
  } else if (const std::int64_t* i = v.as<std::int64_t>()) {
    out << *i;
  } else if (const std::uint64_t* u = v.as<std::uint64_t>()) {
    out << *u;
  } else if (const double* d = v.as<double>()) {
    if (!std::isfinite(*d)) {
      out << "null";  // JSON has no infinities or NaN
    } else {
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, *d);
      out.write(buf, r.ptr - buf);
    }
  } else if (const std::string* str = v.as<std::string>()) {
    out << quote(*str);
  } else if (const array* a = v.as<array>()) {
    if (a->empty()) {
      out << "[]";
      return;
    }
    out << '[';
    for (std::size_t k = 0; k < a->size(); ++k) {
      if (k > 0) out << ',';
      newline(out, deeper(indent));
      write(out, (*a)[k], deeper(indent));
    }
    newline(out, indent);
    out << ']';
  } else if (const object* o = v.as<object>()) {
    if (o->empty()) {
      out << "{}";
      return;
    }
    out << '{';
    bool first = true;
    for (const auto& [key, item] : o->members()) {
      if (!first) out << ',';
      first = false;
      newline(out, deeper(indent));
      out << quote(key) << (indent < 0 ? ":" : ": ");
      write(out, item, deeper(indent));
    }
    newline(out, indent);
    out << '}';
  }
}

std::string to_line(const value& v) {
  std::ostringstream out;
  write(out, v, -1);
  return out.str();
}

}  // namespace gpmkit::json
