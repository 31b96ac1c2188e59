// Size arithmetic on numbers that come from callers or from media: sizes, counts, offsets. Each
// function returns nothing when the exact result does not fit in 64 bits, so that a huge size
// becomes a clear error instead of a small wrapped-around value that passes every later check
// (an allocation of 2^64 - 1 bytes must fail, not reserve a few bytes). Host code.
#pragma once

#include <cstdint>
#include <optional>

namespace gpm {

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// `v` rounded up to a multiple of `to` (which must be > 0).
inline std::optional<std::uint64_t> checked_round_up(std::uint64_t v, std::uint64_t to) {
  const std::uint64_t rem = v % to;
  return rem == 0 ? std::optional<std::uint64_t>(v) : checked_add(v, to - rem);
}

}  // namespace gpm
