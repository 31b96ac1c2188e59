// The gpKVS table's host side (kvs_table.cuh): creating and validating its pool object, and the
// host reference model that every mode's result is checked against.
#include "workloads/kvs/kvs_table.cuh"

#include <cstring>
#include <unordered_set>

#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpmbench::kvs {

table table::create(gpm::pool& p, std::string_view name, std::uint64_t buckets) {
  if (buckets == 0) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "kvs::table::create: a table needs at least one bucket");
  }
  const std::uint64_t offset = create_with_header(p, name, buckets * sizeof(bucket), kTableKind,
                                                  {buckets, kWays, 0});
  // The pool zero-fills new objects: every way is already kEmptyKey.
  return table(p, offset, buckets);
}

table table::open(gpm::pool& p, std::string_view name) {
  std::uint64_t offset = 0;
  const object_header h =
      open_with_header(p, name, kTableKind, offset,
                       [](const std::uint64_t(&s)[3]) { return s[0] * sizeof(bucket); });
  if (h.sizes[0] == 0 || h.sizes[1] != kWays) {
    gpm::throw_error(gpm::errc::corrupt,
                     "pool object '" + std::string(name) + "': the gpKVS header names " +
                         std::to_string(h.sizes[0]) + " buckets of " + std::to_string(h.sizes[1]) +
                         " ways; this build "
                         "needs at least one bucket of 8 ways; recreate it");
  }
  return table(p, offset, h.sizes[0]);
}

void table::clear() const {
  bucket* b = host().buckets;
  std::memset(static_cast<void*>(b), 0, bytes());
  gpm::write_back(b, bytes());
}

void reference::apply(const op_stream& ops, std::uint64_t batch, std::uint64_t ops_per_batch) {
  for (std::uint64_t i = 0; i < ops_per_batch; ++i) {
    if (ops.is_set(batch, i)) last_[ops.key(batch, i) - 1] = batch;
  }
}

void reference::preload(std::uint64_t batch) { std::fill(last_.begin(), last_.end(), batch); }

std::uint64_t reference::keys_set() const {
  std::uint64_t n = 0;
  for (const std::uint64_t b : last_) n += b != kAbsent;
  return n;
}

std::string reference::compare(const table_view& t, std::uint64_t evictions) const {
  std::uint64_t present = 0;
  std::unordered_set<std::uint64_t> seen;
  for (std::uint64_t b = 0; b < t.count; ++b) {
    for (unsigned w = 0; w < kWays; ++w) {
      const slot& s = t.buckets[b].ways[w];
      if (s.key == kEmptyKey) continue;
      const std::string where = "bucket " + std::to_string(b) + " way " + std::to_string(w) +
                                ": key " + std::to_string(s.key);
      if (s.key > last_.size() || last_[s.key - 1] == kAbsent) {
        return where + " was never set";
      }
      if (t.home(s.key) != b) return where + " is not in its home bucket";
      if (!seen.insert(s.key).second) return where + " is stored twice";
      const std::uint64_t expected = value_of(s.key, last_[s.key - 1]);
      if (s.value != expected) {
        return where + " holds the value of batch " + std::to_string(batch_of(s.value)) +
               " (or a torn one), not that of its last SET in batch " +
               std::to_string(last_[s.key - 1]);
      }
      ++present;
    }
  }
  const std::uint64_t expected = keys_set();
  if (present + evictions < expected) {
    return std::to_string(expected - present) + " keys are missing but only " +
           std::to_string(evictions) + " were evicted";
  }
  return {};
}

}  // namespace gpmbench::kvs
