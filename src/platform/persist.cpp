// Host side of the persistence primitives (see persist.hpp): cache-line write-back for
// power-fail-durable mappings, a fence for everything else, and the armed crash-image checker's
// durability model told what became durable.
#include <gpm/platform/persist.hpp>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace gpm::detail {

namespace {

struct range {
  std::uintptr_t begin;
  std::uintptr_t end;
};

std::mutex ranges_mutex;
std::vector<range> ranges;        // guarded by ranges_mutex
std::atomic<int> range_count{0};  // lets the common case (no such mapping) skip the lock

enum class flush_kind { none, clwb, clflushopt, clflush };

flush_kind detect_flush() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0) {
    if (b & (1u << 24)) return flush_kind::clwb;
    if (b & (1u << 23)) return flush_kind::clflushopt;
  }
  return flush_kind::clflush;
#else
  return flush_kind::none;
#endif
}

void write_back(std::uintptr_t begin, std::uintptr_t end) {
  static const flush_kind kind = detect_flush();
  constexpr std::uintptr_t line = 64;
  for (std::uintptr_t a = begin & ~(line - 1); a < end; a += line) {
    auto* p = reinterpret_cast<char*>(a);
#if defined(__x86_64__)
    switch (kind) {
      case flush_kind::clwb: asm volatile("clwb %0" : "+m"(*p)); break;
      case flush_kind::clflushopt: asm volatile("clflushopt %0" : "+m"(*p)); break;
      default: asm volatile("clflush %0" : "+m"(*p)); break;
    }
#else
    (void)p;
    (void)kind;
#endif
  }
}

}  // namespace

void host_persist_range(const void* p, std::size_t len) {
  if (range_count.load(std::memory_order_acquire) != 0 && len != 0) {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t e = b + len;
    std::lock_guard lock(ranges_mutex);
    for (const range& r : ranges) {
      const std::uintptr_t lo = std::max(b, r.begin), hi = std::min(e, r.end);
      if (lo < hi) write_back(lo, hi);
    }
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);  // sfence-ordered on x86
  if (durability_model* m = armed_durability_model.load(std::memory_order_relaxed)) {
    model_persist_range(*m, p, len);
  }
}

void register_power_fail_range(const void* p, std::size_t len) {
  std::lock_guard lock(ranges_mutex);
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  ranges.push_back(range{b, b + len});
  range_count.store(static_cast<int>(ranges.size()), std::memory_order_release);
}

void unregister_power_fail_range(const void* p) {
  std::lock_guard lock(ranges_mutex);
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  std::erase_if(ranges, [b](const range& r) { return r.begin == b; });
  range_count.store(static_cast<int>(ranges.size()), std::memory_order_release);
}

}  // namespace gpm::detail

namespace gpm {

void write_back(const void* p, std::size_t len) {
  if (len != 0) {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    detail::write_back(b, b + len);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (detail::durability_model* m =
          detail::armed_durability_model.load(std::memory_order_relaxed)) {
    detail::model_persist_range(*m, p, len);
  }
}

}  // namespace gpm
