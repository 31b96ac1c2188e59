// The undo logging that makes a gpKVS or gpDB batch failure-atomic, one type per way the paper
// compares (GPM, ASPLOS'22 §5.2, §6), each a template argument of the batch kernels:
//   hcl_undo   gpm::undo_tx on an HCL log: each thread logs into its own striped log, no lock
//   conv_undo  a conventional partitioned log (gpm::conv_log): a thread takes its partition's
//              lock to append; conv_undo_batch below is its begin / commit / recover
//   no_undo    nothing logged, nothing persisted in the kernel: the baselines that make the batch
//              durable another way (gpm-ndp's flat_undo written back by the CPU, CAP's copies)
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

#include <gpm/log/conv_log.cuh>
#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>
#include <gpm/pool/pool_ref.hpp>

namespace gpmbench {

// The most bytes one undo entry saves (a gpKVS bucket).
inline constexpr std::uint32_t kMaxUndoBytes = 128;

struct hcl_undo {
  static constexpr bool persistent = true;
  gpm::undo_tx_ref tx;
  __device__ bool save(const void* p, std::uint32_t bytes) const {
    return tx.save(p, bytes) == gpm::log_status::ok;
  }
};

struct conv_undo {
  static constexpr bool persistent = true;
  gpm::conv_log_ref log;
  gpm::pool_ref pool;
  // The entry: the pool offset, then the old bytes.
  __device__ bool save(const void* p, std::uint32_t bytes) const {
    if (bytes > kMaxUndoBytes || !pool.contains(pool.offset_of(p), bytes)) return false;
    unsigned char entry[sizeof(std::uint64_t) + kMaxUndoBytes];
    const std::uint64_t offset = pool.offset_of(p);
    std::memcpy(entry, &offset, sizeof offset);
    std::memcpy(entry + sizeof offset, p, bytes);
    // Partitions shared by the blocks of a kernel, as the paper's conventional log.
    return log.insert(blockIdx.x % log.partitions(), entry,
                      static_cast<std::uint32_t>(sizeof offset + bytes)) == gpm::log_status::ok;
  }
};

struct no_undo {
  static constexpr bool persistent = false;
  __device__ bool save(const void*, std::uint32_t) const { return true; }
};

// Begin / commit / recover around kernels that log with conv_undo: the same protocol as
// gpm::undo_tx (persisted active mark, log truncated at begin and after commit), on a conv_log.
class conv_undo_batch {
 public:
  // Creates the mark `name` and the log `name` + ".log". Errors as gpm::conv_log::create.
  static conv_undo_batch create(gpm::pool& p, std::string_view name, std::uint32_t partitions,
                                std::uint64_t bytes_per_partition);
  // Opens both, validating the mark's header. Does not recover: call recover().
  static conv_undo_batch open(gpm::pool& p, std::string_view name);

  void begin();   // throws invalid_argument if a batch is active
  void commit();  // throws (batch left active) if a log operation failed
  // Undoes an active batch on the GPU (one thread per partition), then ends it; returns whether
  // one was undone. Throws errc::corrupt on a damaged entry.
  bool recover(cudaStream_t stream = nullptr);
  bool active() const;
  conv_undo ref() const { return {log_.ref(), pool_->ref()}; }
  const gpm::conv_log& log() const { return log_; }

 private:
  conv_undo_batch(gpm::pool& p, std::uint64_t mark_offset, gpm::conv_log log)
      : pool_(&p), mark_offset_(mark_offset), log_(std::move(log)) {}
  void set_active(bool on);
  gpm::pool* pool_;
  std::uint64_t mark_offset_;
  gpm::conv_log log_;
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
