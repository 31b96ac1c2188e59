// A small JSON document model and writer shared by gpmkit's tools: the CLI builds one value per
// command and writes it as JSON (--json) or text; gpmbench builds one value per record and writes
// it on one line (JSON Lines). Objects keep their keys in insertion order so output is stable;
// numbers are written so that they read back exactly; non-finite doubles become null. It never
// parses JSON and never throws on output.
#pragma once

#include <concepts>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gpmkit::json {

class value;
using array = std::vector<value>;
using member = std::pair<std::string, value>;

// An object: keys in the order they were added.
class object {
 public:
  object& add(std::string key, value v);
  const std::vector<member>& members() const noexcept { return members_; }
  bool empty() const noexcept;

 private:
  std::vector<member> members_;
};

class value {
 public:
  using storage = std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double,
                               std::string, array, object>;

  value() : v_(nullptr) {}  // null: written "unknown" in text
  value(std::nullptr_t) : v_(nullptr) {}
  value(bool b) : v_(b) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) value(T n) {
    if constexpr (std::signed_integral<T>) {
      v_ = static_cast<std::int64_t>(n);
    } else {
      v_ = static_cast<std::uint64_t>(n);
    }
  }
  value(double d) : v_(d) {}
  value(const char* s) : v_(std::string(s)) {}
  value(std::string_view s) : v_(std::string(s)) {}
  value(std::string s) : v_(std::move(s)) {}
  value(array a) : v_(std::move(a)) {}
  value(object o) : v_(std::move(o)) {}

  const storage& get() const noexcept { return v_; }
  template <class T>
  const T* as() const noexcept {
    return std::get_if<T>(&v_);
  }
  bool is_scalar() const noexcept { return !as<array>() && !as<object>(); }

 private:
  storage v_;
};

// Defined once value is complete: nvcc's front end instantiates member's pair on sight.
inline bool object::empty() const noexcept { return members_.empty(); }

// Writes `v` as JSON, indented by two spaces per level, ending without a newline.
void write(std::ostream& out, const value& v, int indent = 0);

// `v` as compact JSON on one line (no spaces or newlines).
std::string to_line(const value& v);

// `s` as a JSON string literal (quoted and escaped; invalid UTF-8 bytes become U+FFFD).
std::string quote(std::string_view s);

}  // namespace gpmkit::json
