// Clevel-GPM: the GPHash paper's "naive GPM port" of a CPU persistent hash index (FAST'25 §4.1):
// every GPU thread runs one operation on its own, with no intra-warp cooperation. The index is
// lock-free and log-free: an open-addressing table of 8-byte slot words, each holding a 24-bit
// fingerprint and a record number of the record heap; inserts, updates and erases are one CAS on
// a slot word after the record they publish is durable (updates are out of place). The same code,
// run by CPU threads that write back cache lines instead of fencing, is the CPU-assisted baseline
// (cpu_hash.hpp): Clevel is a CPU persistent hash in the first place.
//
// Crash consistency: a slot word changes only by CAS from one complete state to another, and only
// after the record it names is durable, so after any crash every key holds either its old or its
// new value (an operation is durable once its call returns). Recovery has nothing to undo; records
// allocated but not published are leaked. Erased slots stay tombstones (never reused), so two
// threads can never publish the same key in two slots unless one batch inserts one key twice,
// which the runner's batches never do (inserting a present key reports `duplicate`).
//
// Simplification against Clevel: one level, no resize; the table is sized for its key capacity
// at a load factor of at most 1/2.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include "gpmbench/resources.hpp"
#include "workloads/ycsb/kv_format.cuh"

namespace gpmbench::ycsb {

template <class Key, class Value>
struct clevel_ref {
  std::uint64_t* slots;
  std::uint64_t mask;  // slots - 1
  std::uint32_t max_probe;
  record_heap_ref<Key, Value> heap;

  static constexpr unsigned kTagShift = kSlotRecordBits;

  static GPM_HOST_DEVICE std::uint64_t tag(std::uint64_t h) { return h >> kTagShift; }
  static GPM_HOST_DEVICE std::uint64_t word_for(std::uint64_t h, std::uint64_t record) {
    return (tag(h) << kTagShift) | (record + 2);
  }
  static GPM_HOST_DEVICE std::uint64_t record_of(std::uint64_t word) {
    return (word & kSlotRecordMask) - 2;
  }
  GPM_HOST_DEVICE gpm::atomic_ref<std::uint64_t, gpm::pool_scope> slot(std::uint64_t s) const {
    return gpm::atomic_ref<std::uint64_t, gpm::pool_scope>(slots[s]);
  }

  struct probe {
    std::uint64_t slot;  // the matching slot, or the empty slot that ends the probe sequence
    std::uint64_t word;
    bool found;
  };

  // Linear probing from the key's home slot; fingerprints avoid reading most foreign records.
  GPM_HOST_DEVICE probe locate(const Key& k, std::uint64_t h) const {
    for (std::uint32_t i = 0; i < max_probe; ++i) {
      const std::uint64_t s = (h + i) & mask;
      const std::uint64_t w = slot(s).load(gpm::memory_order_acquire);
      if (w == kEmptySlot) return {s, w, false};
      if (w != kErasedSlot && (w >> kTagShift) == tag(h) && heap.records[record_of(w)].key == k) {
        return {s, w, true};
      }
    }
    return {~0ull, 0, false};
  }

  // Fills record r with (key, value) and makes it durable before anyone can see it.
  template <class Persist>
  GPM_HOST_DEVICE void fill_record(std::uint64_t r, const Key& k, const Value& v) const {
    kv_record<Key, Value>& rec = heap.records[r];
    rec.key = k;
    rec.value = v;
    Persist::range(&rec, sizeof(rec));
  }

  // A new durable record for (key, value), or heap.capacity when the heap is full.
  template <class Persist>
  GPM_HOST_DEVICE std::uint64_t write_record(const Key& k, const Value& v) const {
    const std::uint64_t r = heap.template allocate<Persist>();
    if (r != heap.capacity) fill_record<Persist>(r, k, v);
    return r;
  }

  template <class Persist>
  GPM_HOST_DEVICE op_status insert(const Key& k, std::uint64_t h, const Value& v) const {
    std::uint64_t r = heap.capacity;  // allocated on the first empty slot seen
    for (std::uint32_t i = 0; i < max_probe; ++i) {
      const std::uint64_t s = (h + i) & mask;
      std::uint64_t w = slot(s).load(gpm::memory_order_acquire);
      for (;;) {
        if (w == kEmptySlot) {
          if (r == heap.capacity) {
            r = write_record<Persist>(k, v);
            if (r == heap.capacity) return op_status::full;
          }
          if (slot(s).compare_exchange_strong(w, word_for(h, r), gpm::memory_order_acq_rel)) {
            Persist::range(&slots[s], sizeof(std::uint64_t));
            return op_status::ok;
          }
          continue;  // another thread filled the slot: look at what it holds
        }
        if (w != kErasedSlot && (w >> kTagShift) == tag(h) && heap.records[record_of(w)].key == k) {
          return op_status::duplicate;
        }
        break;
      }
    }
    return op_status::full;
  }

  // Replaces the value of a present key out of place: a new durable record, then one CAS.
  // `next_version(old)` gives the version to write from the value read (read-modify-write).
  template <class Persist, class NextVersion>
  GPM_HOST_DEVICE op_status replace(const Key& k, std::uint64_t h, std::uint64_t id,
                                    NextVersion next_version, std::uint64_t* version) const {
    probe p = locate(k, h);
    if (!p.found) return op_status::not_found;
    // One record per update: a lost race rewrites the same, still unpublished, record with the
    // value computed from the winner's, so contended keys do not drain the heap.
    std::uint64_t r = heap.capacity;
    for (;;) {
      const Value& old = heap.records[record_of(p.word)].value;
      if (!old.belongs_to(id)) return op_status::bad_value;
      *version = old.w[1];
      const Value next = Value::make(id, next_version(old.w[1]));
      if (r == heap.capacity) {
        r = write_record<Persist>(k, next);
        if (r == heap.capacity) return op_status::full;
      } else {
        fill_record<Persist>(r, k, next);
      }
      if (slot(p.slot).compare_exchange_strong(p.word, word_for(h, r), gpm::memory_order_acq_rel)) {
        Persist::range(&slots[p.slot], sizeof(std::uint64_t));
        return op_status::ok;
      }
      // Raced with an update (retry on its record) or an erase (the key is gone).
      if (p.word == kErasedSlot) return op_status::not_found;
    }
  }

  template <class Persist>
  GPM_HOST_DEVICE op_status erase(const Key& k, std::uint64_t h) const {
    probe p = locate(k, h);
    if (!p.found) return op_status::not_found;
    while (!slot(p.slot).compare_exchange_strong(p.word, kErasedSlot, gpm::memory_order_acq_rel)) {
      if (p.word == kErasedSlot) return op_status::not_found;
    }
    Persist::range(&slots[p.slot], sizeof(std::uint64_t));
    return op_status::ok;
  }

  GPM_HOST_DEVICE op_status find(const Key& k, std::uint64_t h, std::uint64_t id,
                                 std::uint64_t* version) const {
    const probe p = locate(k, h);
    if (!p.found) return op_status::not_found;
    const Value v = heap.records[record_of(p.word)].value;
    *version = v.w[1];
    return v.belongs_to(id) ? op_status::ok : op_status::bad_value;
  }

  // Runs `op`; *version gets the version a find or read-modify-write read (else unchanged).
  template <class Persist>
  GPM_HOST_DEVICE op_status execute(const kv_op& op, std::uint64_t* version) const {
    const Key k = Key::from_id(op.key_id);
    const std::uint64_t h = k.hash();
    switch (op.kind) {
      case op_kind::find: return find(k, h, op.key_id, version);
      case op_kind::insert: return insert<Persist>(k, h, Value::make(op.key_id, op.version));
      case op_kind::update:
        return replace<Persist>(
            k, h, op.key_id, [&](std::uint64_t) { return op.version; }, version);
      case op_kind::read_modify_write:
        return replace<Persist>(
            k, h, op.key_id, [&](std::uint64_t old) { return old + op.version; }, version);
      case op_kind::erase: return erase<Persist>(k, h);
    }
    return op_status::bad_value;
  }
};

// One operation per GPU thread: the warp-agnostic execution the paper's factor analysis calls
// the baseline.
template <class Ref, class Persist>
__global__ void per_thread_ops(Ref ref, const kv_op* ops, op_status* status,
                               std::uint64_t* versions, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    std::uint64_t version = 0;
    status[i] = ref.template execute<Persist>(ops[i], &version);
    if (versions != nullptr) versions[i] = version;
  }
}

// The host object: owns the table and the record heap in a pool ("<name>.header", ".slots",
// ".records", ".used").
template <class Key, class Value = kv_value>
class clevel_index {
 public:
  using key_type = Key;
  using value_type = Value;
  static constexpr std::uint32_t kMaxProbe = 128;

  // Room for `keys` live keys and `records` record writes (inserts plus updates, which write
  // out of place) until the next clear().
  static std::uint64_t slots_for(std::uint64_t keys) {
    std::uint64_t s = 64;
    while (s < 2 * keys) s *= 2;
    return s;
  }
  static std::uint64_t pool_bytes(std::uint64_t keys, std::uint64_t records) {
    return index_pool_bytes(slots_for(keys) * sizeof(std::uint64_t) +
                            records * sizeof(kv_record<Key, Value>));
  }

  static clevel_index create(gpm::pool& p, const std::string& name, std::uint64_t keys,
                             std::uint64_t records, geometry launch) {
    gpm::require(keys > 0 && records >= keys,
                 "clevel_index: give room for at least one key and at least as many records "
                 "as keys");
    gpm::require(records < (kSlotRecordMask >> 1),
                 "clevel_index: more records than slot words "
                 "can name (2^39)");
    const std::uint64_t slots = slots_for(keys);
    p.allocate(name + ".slots", slots * sizeof(std::uint64_t), 128);
    record_heap<Key, Value> heap(p, name + ".heap", records, true);
    create_header(p, name + ".header", index_layout::clevel,
                  record_sizes_of<Key, Value>(), {slots, records, 0, 0});
    clevel_index x(p, name, launch);
    x.clear();
    return x;
  }
  // Validates the header and the objects; nothing to recover (see the file comment).
  static clevel_index open(gpm::pool& p, const std::string& name, geometry launch) {
    return clevel_index(p, name, launch);
  }

  clevel_ref<Key, Value> device_ref() const { return ref_for(pool_->ref()); }
  clevel_ref<Key, Value> host_ref() const { return ref_for(pool_->host_ref()); }

  // Empties the index (not crash-atomic: a benchmark's reset between repeats).
  void clear() {
    const clevel_ref<Key, Value> h = host_ref();
    std::memset(h.slots, 0, (h.mask + 1) * sizeof(std::uint64_t));
    *h.heap.used = 0;
    gpm::persist(h.slots, (h.mask + 1) * sizeof(std::uint64_t));
    gpm::persist(h.heap.used, sizeof(std::uint64_t));
  }

  // Runs n operations (device memory) on the GPU, one per thread, enqueued on `s`. `versions`
  // (may be null) gets the version each find or read-modify-write read.
  void execute(const kv_op* ops, op_status* status, std::uint64_t n, cudaStream_t s,
               std::uint64_t* versions = nullptr) const {
    if (n == 0) return;
    const std::uint64_t needed = (n + launch_.threads - 1) / launch_.threads;
    const unsigned blocks =
        static_cast<unsigned>(needed < launch_.blocks ? needed : launch_.blocks);
    gpm::launch(per_thread_ops<clevel_ref<Key, Value>, gpu_persist>, blocks, launch_.threads, 0, s,
                device_ref(), ops, status, versions, n);
  }

  std::uint64_t slot_capacity() const { return slots_; }
  std::uint64_t record_capacity() const { return heap_->capacity(); }
  gpm::pool& pool() const { return *pool_; }

 private:
  clevel_index(gpm::pool& p, const std::string& name, geometry launch)
      : pool_(&p), launch_(launch) {
    const index_header& hd = open_header(p, name + ".header", index_layout::clevel,
                  record_sizes_of<Key, Value>());
    slots_ = hd.geometry[0];
    heap_.emplace(p, name + ".heap", hd.geometry[1], false);
    const gpm::pool_object o = p.get(name + ".slots");
    if (slots_ == 0 || (slots_ & (slots_ - 1)) != 0 || o.bytes < slots_ * sizeof(std::uint64_t)) {
      gpm::throw_error(gpm::errc::corrupt, "clevel_index " + name +
                                               ": the slot table does not match the header; "
                                               "the pool is damaged: recreate the index");
    }
    slots_offset_ = o.offset;
  }
  clevel_ref<Key, Value> ref_for(const gpm::pool_ref& base) const {
    return {base.ptr<std::uint64_t>(slots_offset_), slots_ - 1, kMaxProbe, heap_->ref(base)};
  }

  gpm::pool* pool_;
  geometry launch_;
  std::uint64_t slots_ = 0;
  std::optional<record_heap<Key, Value>> heap_;
  std::uint64_t slots_offset_ = 0;
};

}  // namespace gpmbench::ycsb
