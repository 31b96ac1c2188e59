// The gpKVS table (GPM, ASPLOS'22 §6, after Mega-KV): a persistent hash table of 8-byte keys and
// 8-byte values in a gpm::pool, made of 8-way set-associative buckets of one 128-byte line each.
// A group of 8 GPU threads serves one key: lane w looks at way w of the key's bucket, and the
// group agrees with a ballot. A key lives only in its home bucket; a SET into a full bucket
// evicts a way (Mega-KV is a cache), so the bucket a batch operation touches is known before the
// batch runs, which is what lets the gpm-ndp baseline log it ahead of the kernel. The table is
// sized at 4 keys per 8-way bucket, where evictions are rare (they are counted). This header holds
// the on-media format, the host object that creates and validates it, and the workload's key/value
// streams; the batch kernels are in kvs_kernels.cuh. It never stores a pointer in the pool: the
// table is found by its name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>
#include <gpm/pool/pool.hpp>

#include "gpmbench/zipf.hpp"
#include "workloads/common/object_header.hpp"

namespace gpmbench::kvs {

inline constexpr unsigned kWays = 8;           // slots per bucket = threads per key
inline constexpr std::uint64_t kEmptyKey = 0;  // keys are never 0
inline constexpr std::uint64_t kValueMask = (1ull << 40) - 1;

struct slot {
  std::uint64_t key;  // kEmptyKey: free
  std::uint64_t value;
};
struct alignas(128) bucket {
  slot ways[kWays];
};
static_assert(sizeof(bucket) == 128);

// The table's pool object: an object_header (sizes: buckets, ways), then the buckets.
inline constexpr gpm::format::object_kind kTableKind = bench_kind("gpKVS table", "gPGPSKV1");

// What kernels take: the buckets (in the pool, or in GPU memory for the CAP baselines).
struct table_view {
  bucket* buckets;
  std::uint64_t count;
  GPM_HOST_DEVICE std::uint64_t home(std::uint64_t key) const { return gpm::mix64(key) % count; }
};

// The host object of a table stored as the pool object `name`. The pool must outlive it.
class table {
 public:
  // Bytes of the pool object for `buckets` buckets.
  static std::uint64_t object_bytes(std::uint64_t buckets) {
    return kObjectHeaderBytes + buckets * sizeof(bucket);
  }
  // Buckets for `keys` keys at 2 keys per bucket on average (a quarter full): a bucket
  // overflows (and evicts) with probability ~2.4e-4.
  static std::uint64_t buckets_for(std::uint64_t keys) { return (keys + 1) / 2; }

  // Creates an empty table (every key kEmptyKey, durable). Throws gpm::error: invalid_argument
  // for zero buckets, already_exists, out_of_memory (as pool::allocate).
  static table create(gpm::pool& p, std::string_view name, std::uint64_t buckets);
  // Opens the table `name`, validating its header. Throws not_found, corrupt (checksum, sizes that
  // do not fit the object), version, layout_mismatch (another structure's magic).
  static table open(gpm::pool& p, std::string_view name);

  std::uint64_t buckets() const { return buckets_; }
  std::uint64_t bytes() const { return buckets_ * sizeof(bucket); }
  std::uint64_t data_offset() const { return offset_ + kObjectHeaderBytes; }
  table_view device() const { return {pool_->ref().ptr<bucket>(data_offset()), buckets_}; }
  table_view host() const { return {pool_->host_ptr<bucket>(data_offset()), buckets_}; }
  // Empties the table durably (host stores, then write-back).
  void clear() const;

 private:
  table(gpm::pool& p, std::uint64_t offset, std::uint64_t buckets)
      : pool_(&p), offset_(offset), buckets_(buckets) {}
  gpm::pool* pool_;
  std::uint64_t offset_;
  std::uint64_t buckets_;
};

// The value a SET of `key` in batch `batch` stores: the batch in the high bits, bits of the key's
// hash in the low 40, so that a reader can tell a value of this key from a torn or foreign one.
GPM_HOST_DEVICE inline std::uint64_t value_of(std::uint64_t key, std::uint64_t batch) {
  return (batch << 40) | (gpm::mix64(key ^ 0x5bd1e995ull) & kValueMask);
}
GPM_HOST_DEVICE inline bool value_belongs_to(std::uint64_t value, std::uint64_t key) {
  return (value & kValueMask) == (gpm::mix64(key ^ 0x5bd1e995ull) & kValueMask);
}
GPM_HOST_DEVICE inline std::uint64_t batch_of(std::uint64_t value) { return value >> 40; }

// The way a SET of `key` changes, from the masks of ways holding the key and holding no key: the
// key's own way, else the first empty one, else (a full bucket: eviction) one its hash names.
// GPU tiles and CPU threads choose alike.
GPM_HOST_DEVICE inline unsigned choose_way(unsigned found, unsigned empty, std::uint64_t key) {
  const unsigned m = found != 0 ? found : empty;
  if (m == 0) return static_cast<unsigned>(gpm::mix64(key) % kWays);
  unsigned w = 0;
  while ((m >> w & 1u) == 0) ++w;
  return w;
}

// A GET's value is right when it is a value of this key from a batch not after the current one.
GPM_HOST_DEVICE inline bool get_is_valid(std::uint64_t value, std::uint64_t key,
                                         std::uint64_t batch) {
  return value_belongs_to(value, key) && batch_of(value) <= batch;
}

// The operations of a batch, counter-based so that GPU threads, CPU threads and the host
// reference draw the same ones: op i of batch b is a SET with probability set_percent / 100,
// of key 1 + a Zipf (or uniform, theta 0) draw over the key universe.
struct op_stream {
  zipf_distribution keys;
  std::uint64_t seed;
  std::uint32_t set_percent;  // 100: SETs only

  std::uint64_t universe() const { return keys.items(); }
  GPM_HOST_DEVICE std::uint64_t key(std::uint64_t batch, std::uint64_t i) const {
    return 1 + keys.key(gpm::mix64(seed ^ (batch * 0x9e3779b97f4a7c15ull)), i);
  }
  GPM_HOST_DEVICE bool is_set(std::uint64_t batch, std::uint64_t i) const {
    return set_percent >= 100 || gpm::mix64(gpm::mix64(seed + batch) ^ ~i) % 100 < set_percent;
  }
};

// The host's model of the table: for each key of the universe, the batch of its last SET
// (kAbsent: never set). Replays batches in order; compares a table against it: every key in the
// table must hold the value of its last SET (a batch's SETs of one key store one value), no key
// may be stored twice, and no key may be stored that was never set. Keys may be missing only
// when evicted, so the caller passes the evictions the kernels counted.
class reference {
 public:
  static constexpr std::uint64_t kAbsent = ~0ull;
  explicit reference(std::uint64_t universe) : last_(universe, kAbsent) {}
  void apply(const op_stream& ops, std::uint64_t batch, std::uint64_t ops_per_batch);
  void preload(std::uint64_t batch);  // every key of the universe, set in `batch`
  // Empty string when `t` agrees with the model (see above) and holds at least
  // keys_set() - evictions keys; else the first difference, in words.
  std::string compare(const table_view& t, std::uint64_t evictions) const;
  std::uint64_t keys_set() const;
  std::uint64_t last_batch(std::uint64_t key) const { return last_[key - 1]; }

 private:
  std::vector<std::uint64_t> last_;
};

}  // namespace gpmbench::kvs
