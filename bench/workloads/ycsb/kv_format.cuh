// What every index of the YCSB benchmarks shares: the key and value types (keys of 8 or 32 bytes,
// values of 128 or 32 bytes), the operations a batch carries and the per-operation status they
// return, the persistent record heap that holds key-value pairs, and the checked header that every
// persistent index structure starts with. Keys and values are derived from a 64-bit key id, so that
// a reader can tell a correct value from a torn or foreign one without a reference map.
//
// Never store pointers here: persistent structures hold indexes into pool objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <gpm/platform/atomic.cuh>
#include <gpm/platform/error.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/object_header.hpp>
#include <gpm/pool/pool.hpp>

namespace gpmbench::ycsb {

// ---- keys and values --------------------------------------------------------------------------

// A key of Words 8-byte words (YCSB uses 8- and 32-byte keys). Word 0 is a bijection of the key
// id, so distinct ids give distinct keys whatever the key size.
template <unsigned Words>
struct kv_key {
  static constexpr unsigned kWords = Words;
  std::uint64_t w[Words];

  static GPM_HOST_DEVICE kv_key from_id(std::uint64_t id) {
    kv_key k;
    k.w[0] = gpm::mix64(id);
    for (unsigned i = 1; i < Words; ++i) k.w[i] = gpm::mix64(id ^ (0x5bd1e995ull * i));
    return k;
  }
  GPM_HOST_DEVICE bool operator==(const kv_key& o) const {
    bool same = true;
    for (unsigned i = 0; i < Words; ++i) same = same && w[i] == o.w[i];
    return same;
  }
  GPM_HOST_DEVICE std::uint64_t hash() const {
    std::uint64_t h = w[0];
    for (unsigned i = 1; i < Words; ++i) h = gpm::mix64(h ^ w[i]);
    return gpm::mix64(h ^ 0x9e3779b97f4a7c15ull);
  }
};
using key8 = kv_key<1>;
using key32 = kv_key<4>;

// A value of Words 8-byte words: 128 bytes (a 32-dimension FP32 vector in the paper) by default,
// 32 bytes as the GPHash artifact stores them. Word 0 holds the key id, word 1 the version that
// wrote it, and the other words a pattern of both: a reader that sees a mix of two writes, or
// another key's value, notices. Indexes check at most 32 words (one per lane of a warp).
template <unsigned Words>
struct kv_value_t {
  static_assert(Words >= 3 && Words <= 32, "a value needs at least one pattern word");
  static constexpr unsigned kWords = Words;
  std::uint64_t w[Words];

  static GPM_HOST_DEVICE std::uint64_t pattern(std::uint64_t id, std::uint64_t version,
                                               unsigned i) {
    return gpm::mix64(id * 0x100000001b3ull + version * 31 + i);
  }
  static GPM_HOST_DEVICE kv_value_t make(std::uint64_t id, std::uint64_t version) {
    kv_value_t v;
    v.w[0] = id;
    v.w[1] = version;
    for (unsigned i = 2; i < Words; ++i) v.w[i] = pattern(id, version, i);
    return v;
  }
  GPM_HOST_DEVICE bool belongs_to(std::uint64_t id) const {
    bool ok = w[0] == id;
    for (unsigned i = 2; i < Words; ++i) ok = ok && w[i] == pattern(id, w[1], i);
    return ok;
  }
};
using kv_value = kv_value_t<16>;  // the default: 128 bytes
using value32 = kv_value_t<4>;    // 2 pattern words
static_assert(sizeof(kv_value) == 128 && sizeof(value32) == 32);

// ---- operations and their status ---------------------------------------------------------------

enum class op_kind : std::uint32_t { find, insert, update, erase, read_modify_write };
inline constexpr unsigned kOpKinds = 5;

// One operation of a batch. `version` is what an insert, update or read-modify-write writes
// (read-modify-write writes version + the version it read, so its result depends on the read).
struct kv_op {
  std::uint64_t key_id;
  op_kind kind;
  std::uint32_t version;
};
static_assert(sizeof(kv_op) == 16);

// Per-operation status (WarpCore-style: the error channel of bulk operations).
enum class op_status : std::uint8_t {
  ok,         // done: found (and the value was intact), inserted, updated, erased
  not_found,  // find/update/erase/read-modify-write of an absent key
  duplicate,  // insert of a present key
  full,       // no slot or record left
  bad_value,  // a found value was torn or belongs to another key: an index bug
};
inline constexpr unsigned kOpStatuses = 5;
const char* to_string(op_status s);
const char* to_string(op_kind k);

// ---- persistence policies ----------------------------------------------------------------------

// How an index's code makes its stores durable: GPU threads fence (gpm::persist), CPU threads
// writing the pool through host pointers write the cache lines back (gpm::write_back), and the
// no-persistence ceiling does nothing. A template parameter, not a macro.
struct gpu_persist {
  static GPM_HOST_DEVICE void range(const void*, std::size_t) { gpm::persist(); }
};
struct cpu_write_back {
  GPM_HOST_DEVICE static void range(const void* p, std::size_t n) {
#if GPM_IN_GPU_CODE
    __trap();  // a CPU-only policy: kernels never use it (host-device code only names it)
#else
    gpm::write_back(p, n);
#endif
  }
};

// ---- the checked header of every persistent index structure ------------------------------------

// Which index a header belongs to.
enum class index_layout : std::uint32_t { clevel = 1, slab = 2 };

// The common object header (gpm::format, magic "GPMYCSBI" for every index, version 2.0; 1.0 had
// no value size), then the index's layout, the key and value sizes and the sizes that define the
// geometry. Validated on open: another index's layout (layout_mismatch), version, key or value
// size or a corrupt header is an error that says what is wrong and what to do.
struct index_header {
  gpm::format::object_header common;
  std::uint32_t layout;  // index_layout
  std::uint32_t key_bytes;
  std::uint64_t geometry[4];  // the index's sizes, named by the index
  std::uint32_t value_bytes;
  std::uint32_t reserved0;
};
static_assert(sizeof(index_header) == 112 && offsetof(index_header, common) == 0);

// The key and value sizes an index's header records.
struct record_sizes {
  std::uint32_t key_bytes;
  std::uint32_t value_bytes;
};
template <class Key, class Value>
constexpr record_sizes record_sizes_of() {
  return {sizeof(Key), sizeof(Value)};
}

// Writes a fresh header into the pool object `name` (allocated here) and makes it durable.
std::uint64_t create_header(gpm::pool& p, const std::string& name, index_layout layout,
                            record_sizes sizes, const std::uint64_t (&geometry)[4]);
// Finds and validates the header `name`; throws gpm::error (corrupt, version, layout_mismatch,
// not_found, invalid_argument) with a sentence naming the problem.
const index_header& open_header(const gpm::pool& p, const std::string& name, index_layout layout,
                                record_sizes sizes);

// Pools are made of 4 KiB pages: index sizes are rounded up to them, with room for the pool's
// own header and directory pages.
inline std::uint64_t index_pool_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t kPage = 4096;
  return (bytes + 64 * kPage + kPage - 1) / kPage * kPage;
}

// ---- the record heap -------------------------------------------------------------------------

// Key-value records, allocated by bumping a persistent counter and never reused: a record becomes
// reachable only when an index publishes its number with one 8-byte store or CAS, after the
// record's bytes are durable. A crash can leak the records allocated but not yet published; it
// can never publish a record that is not complete.
template <class Key, class Value = kv_value>
struct kv_record {
  Key key;
  Value value;
};

template <class Key, class Value>
struct record_heap_ref {
  kv_record<Key, Value>* records;
  std::uint64_t* used;  // records handed out so far (may exceed capacity after a failed bump)
  std::uint64_t capacity;

  // A new record's number, or capacity when the heap is full. The counter is made durable
  // before the number is used, so no record handed out before a crash is handed out again.
  template <class Persist>
  GPM_HOST_DEVICE std::uint64_t allocate() const {
    const std::uint64_t r = gpm::atomic_ref<std::uint64_t, gpm::pool_scope>(*used).fetch_add(
        1, gpm::memory_order_relaxed);
    Persist::range(used, sizeof(*used));
    return r < capacity ? r : capacity;
  }
};

// The heap's pool objects: "<prefix>.records" and "<prefix>.used".
template <class Key, class Value>
class record_heap {
 public:
  record_heap(gpm::pool& p, const std::string& prefix, std::uint64_t capacity, bool create)
      : capacity_(capacity) {
    if (create) {
      records_ = p.allocate(prefix + ".records", capacity * sizeof(kv_record<Key, Value>), 128);
      used_ = p.allocate(prefix + ".used", sizeof(std::uint64_t), 128);
    } else {
      const gpm::pool_object r = p.get(prefix + ".records");
      records_ = r.offset;
      used_ = p.get(prefix + ".used").offset;
      if (r.bytes < capacity * sizeof(kv_record<Key, Value>)) {
        gpm::throw_error(gpm::errc::corrupt, "the record heap " + prefix +
                                                 ".records is smaller than its header says; the "
                                                 "pool is damaged: recreate the index");
      }
    }
  }
  // The view for code running where `base` maps the pool (ref() for kernels, host_ref() for CPU).
  record_heap_ref<Key, Value> ref(const gpm::pool_ref& base) const {
    return {base.ptr<kv_record<Key, Value>>(records_), base.ptr<std::uint64_t>(used_), capacity_};
  }
  std::uint64_t capacity() const { return capacity_; }

 private:
  std::uint64_t capacity_;
  std::uint64_t records_ = 0;
  std::uint64_t used_ = 0;
};

// A record's number as slot words store it: 0 is an empty slot, 1 a deleted one.
inline constexpr std::uint64_t kEmptySlot = 0;
inline constexpr std::uint64_t kErasedSlot = 1;
inline constexpr std::uint64_t kSlotRecordBits = 40;
inline constexpr std::uint64_t kSlotRecordMask = (1ull << kSlotRecordBits) - 1;

}  // namespace gpmbench::ycsb
