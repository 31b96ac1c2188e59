// The undo logging that makes a gpKVS or gpDB batch failure-atomic, one policy per way the paper
// compares (GPM, ASPLOS'22 §5.2, §6), each a template argument of the batch kernels:
//   tx_undo<Log>  gpm's undo transactions: hcl_undo (gpm::undo_tx, each thread logs into its own
//                 striped HCL log, no lock) and conv_undo (gpm::conv_undo_tx, the blocks share a
//                 conventional log's partitions, a thread takes its partition's lock to append);
//                 the library's begin / commit / recover drives them
//   no_undo       nothing logged, nothing persisted in the kernel: the baselines that make the
//   batch
//                 durable another way (gpm-ndp's flat_undo written back by the CPU, CAP's copies)
// flat_undo is the CPU-persisted undo log of the gpm-ndp and cpu modes: entries of a fixed size in
// regions (one per CPU thread), each entry written back before its region's count, which is
// written back before the data changes. Every log here holds (pool offset, old bytes) entries and
// recovers by restoring them newest first, which is idempotent: a crash during recovery, then
// recovery again, restores the same bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>
#include <gpm/pool/pool_ref.hpp>

namespace gpmbench {

// The most bytes one flat_undo entry saves (a gpKVS bucket).
inline constexpr std::uint32_t kMaxUndoBytes = 128;

template <class Log>
struct tx_undo {
  static constexpr bool persistent = true;
  gpm::basic_undo_tx_ref<Log> tx;
  __device__ bool save(const void* p, std::uint32_t bytes) const {
    return tx.save(p, bytes) == gpm::log_status::ok;
  }
};
using hcl_undo = tx_undo<gpm::hcl_log>;
using conv_undo = tx_undo<gpm::conv_log>;

// The kernels' policy for a batch of `tx`.
template <class Log>
tx_undo<Log> undo_of(const gpm::basic_undo_tx<Log>& tx) {
  return {tx.ref()};
}

// The shape of an undo transaction's log for batch kernels of geometry g whose threads each log
// up to `per_thread` bytes: HCL, a stream per thread; conventional, a partition per block, as
// many bytes as its threads might log.
inline gpm::hcl_geometry undo_shape(gpm::hcl_log*, unsigned blocks, unsigned threads,
                                    std::uint64_t per_thread) {
  return {blocks, threads, per_thread};
}
inline gpm::conv_partitions undo_shape(gpm::conv_log*, unsigned blocks, unsigned threads,
                                       std::uint64_t per_thread) {
  return {blocks, per_thread * threads};
}

struct no_undo {
  static constexpr bool persistent = false;
  __device__ bool save(const void*, std::uint32_t) const { return true; }
};

// The CPU-persisted undo log (gpm-ndp, cpu). Host-side recovery; the GPU may fill entries of a
// region (entry(region, i)) that the host then makes durable with publish().
class flat_undo {
 public:
  struct entry_head {
    std::uint64_t offset;  // in the pool
    std::uint64_t bytes;   // old bytes following the head
  };

  // Creates `regions` regions of `capacity` entries of up to `max_bytes` old bytes each.
  static flat_undo create(gpm::pool& p, std::string_view name, std::uint32_t regions,
                          std::uint64_t capacity, std::uint32_t max_bytes);
  static flat_undo open(gpm::pool& p, std::string_view name);

  std::uint64_t entry_bytes() const { return sizeof(entry_head) + max_bytes_; }
  std::uint32_t regions() const { return regions_; }
  std::uint64_t capacity() const { return capacity_; }

  void begin();  // counts zeroed, then the active mark, each written back
  // Host: saves the old bytes at `p` (in the pool) as the region's next entry, durably, before
  // the caller changes them. Throws out_of_memory when the region is full. Returns bytes
  // written back.
  std::uint64_t save(std::uint32_t region, const void* p, std::uint32_t bytes);
  // The GPU's or host's address of entry i of a region, for filling entries in bulk.
  unsigned char* device_entry(std::uint32_t region, std::uint64_t i) const;
  unsigned char* host_entry(std::uint32_t region, std::uint64_t i) const;
  // Makes `count` entries of a region filled in bulk durable and counts them (the caller writes
  // their bytes back first, e.g. with ndp_persister, then calls this).
  void publish(std::uint32_t region, std::uint64_t count);
  // Writes back the pool bytes that entries [begin, end) of a region name: after a batch logged
  // ahead in them, the data it may have changed (callers split the entries among CPU threads).
  // Returns the bytes written back.
  std::uint64_t write_back_targets(std::uint32_t region, std::uint64_t begin,
                                   std::uint64_t end) const;
  void commit();
  // Restores an active batch from every region (host stores + write-back) and ends it.
  bool recover();
  bool active() const;

 private:
  flat_undo(gpm::pool& p, std::uint64_t offset, std::uint32_t regions, std::uint64_t capacity,
            std::uint32_t max_bytes)
      : pool_(&p), offset_(offset), regions_(regions), capacity_(capacity), max_bytes_(max_bytes) {}
  std::uint64_t* words() const;  // active mark, then one count per region
  std::uint64_t entries_offset() const;
  gpm::pool* pool_;
  std::uint64_t offset_;
  std::uint32_t regions_;
  std::uint64_t capacity_;
  std::uint32_t max_bytes_;
};

}  // namespace gpmbench
