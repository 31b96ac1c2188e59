// SlabHash-GPM: the GPHash paper's list-based naive GPM port (FAST'25 §4.1): SlabHash's linked
// slabs ported to the pool, with logging for crash consistency. A bucket is a chain of 256-byte
// slabs of 31 slot words (record numbers of the record heap) and a next-slab word; a warp walks a
// chain one slab at a time, each lane reading one word and comparing the full key of its record
// (SlabHash has no fingerprints). Operations are warp-cooperative: the warp serves its lanes'
// operations one after another.
//
// Concurrency: every bucket has a sequence lock. Writers take it (odd), readers retry when it was
// odd or moved while they read; so an update can overwrite a value in place, as SlabHash does.
// Crash consistency:
//   insert  the record is written and made durable first; one 8-byte store publishes it (into a
//           free slot, or into a new slab that is filled before one 8-byte store links it)
//   erase   one 8-byte store empties the slot
//   update, read-modify-write   the value is overwritten in place, so it is undo-logged: the warp
//           writes the old value and its record number to its own log entry, makes it durable,
//           arms the entry with one 8-byte store, overwrites, persists, disarms.
// recover() copies the old value of every armed entry back and resets the locks: after a crash
// every key holds its old or its new value. Recovery is idempotent.
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

inline constexpr unsigned kSlabWords = 32;
inline constexpr unsigned kSlabSlots = kSlabWords - 1;  // word 31 links the next slab

// One warp's undo log entry: the record whose value is being overwritten (number + 1; 0: not
// armed) and its old value.
template <class Value>
struct alignas(128) slab_undo_entry {
  std::uint64_t armed;
  std::uint64_t pad[15];
  Value old;
};

template <class Key, class Value>
struct slab_ref {
  std::uint64_t* slabs;       // slab s is words [s * 32, s * 32 + 32); slabs < buckets are heads
  std::uint64_t* locks;       // one sequence lock per bucket
  std::uint64_t* slabs_used;  // slabs handed out (heads included)
  std::uint64_t slab_capacity;
  std::uint64_t bucket_mask;
  slab_undo_entry<Value>* log;
  std::uint64_t log_entries;
  record_heap_ref<Key, Value> heap;

  static constexpr unsigned kFull = 0xffffffffu;
  using sys_word = gpm::atomic_ref<std::uint64_t, gpm::pool_scope>;

  struct hit {
    std::uint64_t slab;  // where the search ended
    int lane;            // the slot holding the key, -1 when absent
    std::uint64_t record;
  };

  __device__ std::uint64_t word(std::uint64_t slab, unsigned lane) const {
    return sys_word(slabs[slab * kSlabWords + lane]).load(gpm::memory_order_acquire);
  }

  // Walks the bucket's chain; every lane reads one word of each slab and compares its key.
  __device__ hit locate(const Key& k, std::uint64_t bucket, unsigned lane) const {
    std::uint64_t slab = bucket;
    for (;;) {
      const std::uint64_t w = word(slab, lane);
      const bool match = lane < kSlabSlots && w != kEmptySlot && heap.records[w - 2].key == k;
      const unsigned m = __ballot_sync(kFull, match);
      if (m != 0) {
        const int l = __ffs(static_cast<int>(m)) - 1;
        return {slab, l, __shfl_sync(kFull, w, l) - 2};
      }
      const std::uint64_t next = __shfl_sync(kFull, w, kSlabSlots);
      if (next == 0) return {slab, -1, 0};
      slab = next - 1;
    }
  }

  // Lanes 0..kWords-1 read one word each of the record's value and check it together.
  __device__ bool value_intact(std::uint64_t record, std::uint64_t id, unsigned lane,
                               std::uint64_t* version) const {
    const Value& v = heap.records[record].value;
    const std::uint64_t mine = lane < Value::kWords ? v.w[lane] : 0;
    const std::uint64_t ver = __shfl_sync(kFull, mine, 1);
    const bool ok = lane >= Value::kWords || (lane == 0 && mine == id) || lane == 1 ||
                    (lane >= 2 && mine == Value::pattern(id, ver, lane));
    *version = ver;
    return __all_sync(kFull, ok);
  }

  __device__ std::uint64_t lock(std::uint64_t bucket, unsigned lane) const {
    std::uint64_t seq = 0;
    if (lane == 0) {
      const sys_word l(locks[bucket]);
      for (;;) {
        seq = l.load(gpm::memory_order_relaxed);
        if ((seq & 1) == 0 && l.compare_exchange_strong(seq, seq + 1, gpm::memory_order_acq_rel)) {
          break;
        }
        __nanosleep(64);
      }
    }
    return __shfl_sync(kFull, seq, 0);
  }
  __device__ void unlock(std::uint64_t bucket, std::uint64_t seq, unsigned lane) const {
    __syncwarp();
    if (lane == 0) sys_word(locks[bucket]).store(seq + 2, gpm::memory_order_release);
  }

  // Lanes write a record (key words, then value words) and make it durable.
  __device__ void write_record(std::uint64_t r, const Key& k, const Value& v, unsigned lane) const {
    std::uint64_t* words = reinterpret_cast<std::uint64_t*>(&heap.records[r]);
    if (lane < Key::kWords) words[lane] = k.w[lane];
    if (lane < Value::kWords) words[Key::kWords + lane] = v.w[lane];
    gpm::persist();
    __syncwarp();
  }

  __device__ op_status insert(const Key& k, std::uint64_t bucket, const Value& v,
                              unsigned lane) const {
    if (locate(k, bucket, lane).lane >= 0) return op_status::duplicate;
    std::uint64_t r = 0;
    if (lane == 0) r = heap.template allocate<gpu_persist>();
    r = __shfl_sync(kFull, r, 0);
    if (r == heap.capacity) return op_status::full;
    write_record(r, k, v, lane);
    std::uint64_t slab = bucket;
    for (;;) {
      const std::uint64_t w = word(slab, lane);
      const unsigned free_slots = __ballot_sync(kFull, lane < kSlabSlots && w == kEmptySlot);
      if (free_slots != 0) {
        if (lane == static_cast<unsigned>(__ffs(static_cast<int>(free_slots)) - 1)) {
          sys_word(slabs[slab * kSlabWords + lane]).store(r + 2, gpm::memory_order_relaxed);
          gpm::persist();
        }
        return op_status::ok;
      }
      const std::uint64_t next = __shfl_sync(kFull, w, kSlabSlots);
      if (next != 0) {
        slab = next - 1;
        continue;
      }
      // Chain full: fill a fresh slab, then link it with one 8-byte store.
      std::uint64_t fresh = 0;
      if (lane == 0) {
        fresh = sys_word(*slabs_used).fetch_add(1, gpm::memory_order_relaxed);
        gpm::persist();
      }
      fresh = __shfl_sync(kFull, fresh, 0);
      if (fresh >= slab_capacity) return op_status::full;
      sys_word(slabs[fresh * kSlabWords + lane])
          .store(lane == 0 ? r + 2 : 0, gpm::memory_order_relaxed);
      gpm::persist();
      __syncwarp();
      if (lane == kSlabSlots) {
        sys_word(slabs[slab * kSlabWords + lane]).store(fresh + 1, gpm::memory_order_relaxed);
        gpm::persist();
      }
      return op_status::ok;
    }
  }

  // The in-place overwrite under the undo log of this warp's entry.
  __device__ void logged_overwrite(std::uint64_t record, const Value& v, slab_undo_entry<Value>& e,
                                   unsigned lane) const {
    std::uint64_t* value = heap.records[record].value.w;
    if (lane < Value::kWords) e.old.w[lane] = value[lane];
    gpm::persist();
    __syncwarp();
    if (lane == 0) {
      sys_word(e.armed).store(record + 1, gpm::memory_order_relaxed);
      gpm::persist();
    }
    __syncwarp();
    if (lane < Value::kWords) value[lane] = v.w[lane];
    gpm::persist();
    __syncwarp();
    if (lane == 0) {
      sys_word(e.armed).store(0, gpm::memory_order_relaxed);
      gpm::persist();
    }
  }

  __device__ op_status erase(const Key& k, std::uint64_t bucket, unsigned lane) const {
    const hit h = locate(k, bucket, lane);
    if (h.lane < 0) return op_status::not_found;
    if (lane == static_cast<unsigned>(h.lane)) {
      sys_word(slabs[h.slab * kSlabWords + lane]).store(kEmptySlot, gpm::memory_order_relaxed);
      gpm::persist();
    }
    return op_status::ok;
  }

  // Reads under the sequence lock: retried until no writer held the bucket meanwhile.
  __device__ op_status find(const Key& k, std::uint64_t bucket, std::uint64_t id, unsigned lane,
                            std::uint64_t* version) const {
    const sys_word l(locks[bucket]);
    for (;;) {
      // Lane 0's reading decides for the warp, so that the lanes never diverge.
      const std::uint64_t before = __shfl_sync(kFull, l.load(gpm::memory_order_acquire), 0);
      if ((before & 1) != 0) {
        __nanosleep(64);
        continue;
      }
      const hit h = locate(k, bucket, lane);
      const bool intact = h.lane >= 0 && value_intact(h.record, id, lane, version);
      __threadfence();
      if (__shfl_sync(kFull, l.load(gpm::memory_order_acquire), 0) != before) continue;
      if (h.lane < 0) return op_status::not_found;
      return intact ? op_status::ok : op_status::bad_value;
    }
  }

  template <bool AddOld>
  __device__ op_status overwrite(const Key& k, std::uint64_t bucket, const kv_op& op,
                                 slab_undo_entry<Value>& e, unsigned lane,
                                 std::uint64_t* old_version) const {
    const hit h = locate(k, bucket, lane);
    if (h.lane < 0) return op_status::not_found;
    if (!value_intact(h.record, op.key_id, lane, old_version)) return op_status::bad_value;
    const std::uint64_t version = AddOld ? *old_version + op.version : op.version;
    logged_overwrite(h.record, Value::make(op.key_id, version), e, lane);
    return op_status::ok;
  }

  // The whole warp runs `op` (every lane passes the same op); returns its status on every lane,
  // and in *version the version a find or read-modify-write read.
  __device__ op_status execute(const kv_op& op, slab_undo_entry<Value>& e, unsigned lane,
                               std::uint64_t* version) const {
    const Key k = Key::from_id(op.key_id);
    const std::uint64_t bucket = k.hash() & bucket_mask;
    if (op.kind == op_kind::find) return find(k, bucket, op.key_id, lane, version);
    const std::uint64_t seq = lock(bucket, lane);
    op_status st = op_status::bad_value;
    switch (op.kind) {
      case op_kind::insert: st = insert(k, bucket, Value::make(op.key_id, op.version), lane); break;
      case op_kind::update: st = overwrite<false>(k, bucket, op, e, lane, version); break;
      case op_kind::read_modify_write: st = overwrite<true>(k, bucket, op, e, lane, version); break;
      case op_kind::erase: st = erase(k, bucket, lane); break;
      case op_kind::find: break;
    }
    unlock(bucket, seq, lane);
    return st;
  }
};

// Each warp takes 32 consecutive operations at a time and runs them one by one, cooperatively.
template <class Key, class Value>
__global__ void warp_ops(slab_ref<Key, Value> ref, const kv_op* ops, op_status* status,
                         std::uint64_t* versions, std::uint64_t n) {
  const unsigned lane = gpm::lane_id();
  const std::uint64_t warp = gpm::tile_index<32>();
  const std::uint64_t warps = gpm::tile_count<32>();
  slab_undo_entry<Value>& entry = ref.log[warp];
  for (std::uint64_t base = warp * warpSize; base < n; base += warps * warpSize) {
    const std::uint64_t end = base + warpSize < n ? base + warpSize : n;
    for (std::uint64_t i = base; i < end; ++i) {
      std::uint64_t version = 0;
      const op_status st = ref.execute(ops[i], entry, lane, &version);
      if (lane == 0) {
        status[i] = st;
        if (versions != nullptr) versions[i] = version;
      }
    }
  }
}

// The host object: owns slabs, locks, the undo log and the record heap in a pool
// ("<name>.header", ".slabs", ".locks", ".used", ".log", ".heap.*").
template <class Key, class Value = kv_value>
class slab_index {
 public:
  using key_type = Key;
  using value_type = Value;

  // Buckets for `keys` keys at about 16 keys per bucket (half a slab), and as many slabs again
  // for overflow: SlabHash's recommended utilisation.
  static std::uint64_t buckets_for(std::uint64_t keys) {
    std::uint64_t b = 16;
    while (b * 16 < keys) b *= 2;
    return b;
  }
  static std::uint64_t slabs_for(std::uint64_t keys) { return 2 * buckets_for(keys) + keys / 16; }
  static std::uint64_t pool_bytes(std::uint64_t keys, std::uint64_t records,
                                  std::uint64_t log_entries) {
    return index_pool_bytes(slabs_for(keys) * kSlabWords * 8 + buckets_for(keys) * 8 +
                            log_entries * sizeof(slab_undo_entry<Value>) +
                            records * sizeof(kv_record<Key, Value>));
  }

  static slab_index create(gpm::pool& p, const std::string& name, std::uint64_t keys,
                           std::uint64_t records, geometry launch) {
    gpm::require(keys > 0 && records >= keys,
                 "slab_index: give room for at least one key and at least as many records as keys");
    gpm::require(launch.threads % 32 == 0, "slab_index: blocks must be whole warps");
    const std::uint64_t buckets = buckets_for(keys), slabs = slabs_for(keys);
    const std::uint64_t log_entries = std::uint64_t{launch.blocks} * launch.threads / 32;
    p.allocate(name + ".slabs", slabs * kSlabWords * 8, 256);
    p.allocate(name + ".locks", buckets * 8, 128);
    p.allocate(name + ".used", 8, 128);
    p.allocate(name + ".log", log_entries * sizeof(slab_undo_entry<Value>), 128);
    record_heap<Key, Value> heap(p, name + ".heap", records, true);
    create_header(p, name + ".header", index_layout::slab,
                  record_sizes_of<Key, Value>(),
                  {buckets, slabs, log_entries, records});
    slab_index x(p, name, launch);
    x.clear();
    return x;
  }

  // Validates the header and objects, then recovers (see recover()).
  static slab_index open(gpm::pool& p, const std::string& name, geometry launch) {
    slab_index x(p, name, launch);
    x.recover();
    return x;
  }

  // Rolls back every armed undo entry and releases every lock. Idempotent: a crash in here and
  // another recover() give the same index.
  std::uint64_t recover() {
    const slab_ref<Key, Value> h = host_ref();
    std::uint64_t rolled_back = 0;
    for (std::uint64_t e = 0; e < h.log_entries; ++e) {
      slab_undo_entry<Value>& entry = h.log[e];
      if (entry.armed == 0) continue;
      if (entry.armed > h.heap.capacity) {
        gpm::throw_error(gpm::errc::corrupt, "slab_index: undo entry " + std::to_string(e) +
                                                 " names a record beyond the heap; the pool is "
                                                 "damaged: recreate the index");
      }
      Value& v = h.heap.records[entry.armed - 1].value;
      v = entry.old;
      gpm::persist(&v, sizeof(v));
      entry.armed = 0;
      gpm::persist(&entry.armed, sizeof(entry.armed));
      ++rolled_back;
    }
    std::memset(h.locks, 0, (h.bucket_mask + 1) * 8);
    gpm::persist(h.locks, (h.bucket_mask + 1) * 8);
    return rolled_back;
  }

  slab_ref<Key, Value> device_ref() const { return ref_for(pool_->ref()); }
  slab_ref<Key, Value> host_ref() const { return ref_for(pool_->host_ref()); }

  void clear() {
    const slab_ref<Key, Value> h = host_ref();
    std::memset(h.slabs, 0, h.slab_capacity * kSlabWords * 8);
    std::memset(h.locks, 0, (h.bucket_mask + 1) * 8);
    std::memset(h.log, 0, h.log_entries * sizeof(slab_undo_entry<Value>));
    *h.slabs_used = h.bucket_mask + 1;
    *h.heap.used = 0;
    gpm::persist(h.slabs, h.slab_capacity * kSlabWords * 8);
    gpm::persist(h.locks, (h.bucket_mask + 1) * 8);
    gpm::persist(h.log, h.log_entries * sizeof(slab_undo_entry<Value>));
    gpm::persist(h.slabs_used, 8);
    gpm::persist(h.heap.used, 8);
  }

  // Runs n operations (device memory), a warp per 32, enqueued on `s`; `versions` (may be null)
  // gets the version each find or read-modify-write read.
  void execute(const kv_op* ops, op_status* status, std::uint64_t n, cudaStream_t s,
               std::uint64_t* versions = nullptr) const {
    if (n == 0) return;
    // At most one warp per log entry; no more warps than 32-operation groups.
    const std::uint64_t groups = (n + 31) / 32;
    const std::uint64_t warps_per_block = launch_.threads / 32;
    std::uint64_t blocks = (groups + warps_per_block - 1) / warps_per_block;
    if (blocks > launch_.blocks) blocks = launch_.blocks;
    gpm::launch(warp_ops<Key, Value>, static_cast<unsigned>(blocks), launch_.threads, 0, s,
                device_ref(), ops, status, versions, n);
  }

  std::uint64_t bucket_count() const { return buckets_; }
  std::uint64_t slot_capacity() const { return slabs_ * kSlabSlots; }
  std::uint64_t slabs_in_use() const { return *host_ref().slabs_used; }

 private:
  slab_index(gpm::pool& p, const std::string& name, geometry launch) : pool_(&p), launch_(launch) {
    const index_header& hd = open_header(p, name + ".header", index_layout::slab,
                  record_sizes_of<Key, Value>());
    buckets_ = hd.geometry[0];
    slabs_ = hd.geometry[1];
    log_entries_ = hd.geometry[2];
    heap_.emplace(p, name + ".heap", hd.geometry[3], false);
    const auto sized = [&](const char* part, std::uint64_t bytes) {
      const gpm::pool_object o = p.get(name + part);
      if (o.bytes < bytes) {
        gpm::throw_error(gpm::errc::corrupt, "slab_index " + name + ": object " + name + part +
                                                 " is smaller than the header says; the pool is "
                                                 "damaged: recreate the index");
      }
      return o.offset;
    };
    if (buckets_ == 0 || (buckets_ & (buckets_ - 1)) != 0 || slabs_ < buckets_) {
      gpm::throw_error(gpm::errc::corrupt, "slab_index " + name +
                                               ": the header's geometry is impossible; the pool "
                                               "is damaged: recreate the index");
    }
    gpm::require(
        std::uint64_t{launch.blocks} * launch.threads / 32 <= log_entries_ || launch.blocks == 0,
        "slab_index: this launch geometry has more warps than the index has undo log "
        "entries; open it with the geometry it was created with, or fewer blocks");
    slabs_off_ = sized(".slabs", slabs_ * kSlabWords * 8);
    locks_off_ = sized(".locks", buckets_ * 8);
    used_off_ = sized(".used", 8);
    log_off_ = sized(".log", log_entries_ * sizeof(slab_undo_entry<Value>));
  }
  slab_ref<Key, Value> ref_for(const gpm::pool_ref& b) const {
    return {b.ptr<std::uint64_t>(slabs_off_),
            b.ptr<std::uint64_t>(locks_off_),
            b.ptr<std::uint64_t>(used_off_),
            slabs_,
            buckets_ - 1,
            b.ptr<slab_undo_entry<Value>>(log_off_),
            log_entries_,
            heap_->ref(b)};
  }

  gpm::pool* pool_;
  geometry launch_;
  std::uint64_t buckets_ = 0, slabs_ = 0, log_entries_ = 0;
  std::optional<record_heap<Key, Value>> heap_;
  std::uint64_t slabs_off_ = 0, locks_off_ = 0, used_off_ = 0, log_off_ = 0;
};

}  // namespace gpmbench::ycsb
