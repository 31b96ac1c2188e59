// gpm::undo_tx and gpm::conv_undo_tx: failure-atomic batches of in-place updates to pool data,
// made with undo logging (GPM, ASPLOS'22, §4.1 and Figure 6), over either log of this module:
//   undo_tx       = basic_undo_tx<hcl_log>   every thread logs to its own HCL stream, no lock
//   conv_undo_tx  = basic_undo_tx<conv_log>  the blocks of a kernel share a conventional log's
//                                            partitions (block b logs to b % partitions, under the
//                                            partition's lock), as the paper's conventional log
// One protocol for both: the host marks a batch active (persisted); kernels log the old bytes of
// each range before updating it in place; the host commits (clears the mark, truncates the log).
// After a crash, recover() undoes an interrupted batch on the GPU, every stream (thread or
// partition) rolling back newest-first in parallel, so the data is exactly as it was before the
// batch. Recovery is idempotent: a crash during recover(), then recover() again, gives the same
// state. The logs differ only in which stream a thread uses: undo_streams below.
//
// Rule: within one batch, a given byte must be updated through one stream only: one thread slot
// (block, thread of the recorded geometry) of an undo_tx, e.g. the thread that owns an array
// element; one partition of a conv_undo_tx (blocks b, b + partitions, ... share partition b).
// Streams roll back independently, so two streams logging the same byte would restore it in no
// defined order.
//
//   gpm::undo_tx tx = gpm::undo_tx::create(pool, "balances", {blocks, threads, 16 * 64});
//   // or: gpm::conv_undo_tx tx = gpm::conv_undo_tx::create(pool, "balances", {8, 64 << 10});
//   tx.recover();                            // at start-up: undo a batch a crash interrupted
//   tx.begin();
//   gpm::launch(pay, blocks, threads, 0, nullptr, tx.ref(), pool.ref(), accounts_off);
//   tx.commit();                             // throws if any update failed; then tx.recover()
//
//   __global__ void pay(gpm::undo_tx_ref tx, gpm::pool_ref pool, std::uint64_t off) {
//     long* a = pool.ptr<long>(off) + blockIdx.x * blockDim.x + threadIdx.x;
//     if (tx.update(a, *a - 10) != gpm::log_status::ok) return;  // logged, stored, persisted
//   }
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>
#include <gpm/pool/pool_ref.hpp>

namespace gpm {

template <class Log>
class basic_undo_tx;

// What the last recover() did (basic_undo_tx::last_recovery()), phase by phase; each phase is
// timed on the host up to the end of its work, launches included.
struct undo_recovery {
  double seconds = 0;           // the whole recover() call
  bool undone = false;          // a batch was active and was undone
  bool from_copy = false;       // the entries were read from a copy of the log in GPU memory
  double allocate_seconds = 0;  // allocating that copy (the CUDA driver's; 0 when one was kept)
  double kernel_seconds = 0;    // the recovery kernel: copying the log and rolling back
};

// The log of a conv_undo_tx: conv_log::create's partitions and bytes per partition.
struct conv_partitions {
  std::uint32_t partitions = 0;
  std::uint64_t bytes_per_partition = 0;
};

namespace detail::log {

// What an undo transaction needs from its log and nothing else: the shape it is created with,
// the stream the calling thread logs to, the stream it rolls back in the recovery kernel and
// that kernel's launch shape.
template <class Log>
struct undo_streams;

// What undo recovery's copy of a log needs of its device view, either log's: where its streams'
// chunks are, how many bytes, and the same view reading them from a copy (basic_undo_tx).
template <class Ref>
struct log_data {
  GPM_HOST_DEVICE static const char* data(const Ref& log) { return log.v_.data(); }
  static std::uint64_t data_bytes(const Ref& log) { return log.v_.data_bytes; }
  static Ref reading(Ref log, char* copy) {
    log.v_.data_base = copy;
    return log;
  }
  // The `active` lanes of a warp copy bytes [at, at + bytes) of the log's data into `copy` at the
  // same offset, with 16-byte loads of whole lines: the range is rounded out to 16 bytes (a
  // neighbour's bytes copied along are the same bytes, so a warp copying them concurrently writes
  // what is there).
  __device__ static void copy_span(const Ref& log, char* copy, std::uint64_t at,
                                   std::uint64_t bytes, unsigned active) {
    const auto* src = reinterpret_cast<const ulonglong2*>(data(log));
    auto* dst = reinterpret_cast<ulonglong2*>(copy);
    const unsigned lane = lane_id();
    const auto rank = static_cast<std::uint64_t>(__popc(active & ((1u << lane) - 1)));
    const auto lanes = static_cast<std::uint64_t>(__popc(active));
    const std::uint64_t end = (at + bytes + 15) / 16;
    for (std::uint64_t w = at / 16 + rank; w < end; w += lanes) dst[w] = src[w];
  }
};

// hcl_log: a thread logs to and rolls back its own stream; every kernel that uses the
// transaction, recovery included, runs with the log's geometry (checked: wrong_geometry).
template <>
struct undo_streams<hcl_log> : log_data<hcl_log_ref> {
  using ref_type = hcl_log_ref;
  using shape = hcl_geometry;
  static hcl_log create(pool& p, std::string_view name, const shape& s) {
    return hcl_log::create(p, name, s);
  }
  static std::uint64_t object_bytes(const shape& s) { return hcl_log::object_bytes(s); }
  template <class F>
  __device__ static log_status logging(const hcl_log_ref& log, F&& f) {
    return log.with_thread(f);
  }
  template <class F>
  __device__ static log_status rolling_back(const hcl_log_ref& log, F&& f) {
    return log.with_thread(f);
  }
  __device__ static log_status report(const hcl_log_ref& log, log_status s) {
    return log.v_.report(s, ~std::uint64_t{0});
  }
  static dim3 grid(const hcl_log& log) { return log.grid(); }
  static dim3 block(const hcl_log& log) { return log.block(); }

  // Recovery reads the log from a copy in GPU memory (basic_undo_tx::recover), which each warp
  // of the recovery kernel makes of its own streams piece by piece, newest chunks first, rolling
  // back what each piece completes before copying the next (so that its restores, posted stores
  // to the pool, overlap the reads of the next piece). The calling thread's stream's used chunks,
  // and the warp's chunks [lo, hi) copied by its `active` lanes (every thread of the warp calls
  // it): HCL rows [lo, hi) of the warp's region, whatever each lane uses of them.
  static constexpr std::uint64_t copy_step_chunks = 16;  // rows: 2 KiB a warp
  __device__ static std::uint64_t own_chunks(const hcl_log_ref& log) {
    const stream_ref s = log.stream_of(log.where().stream);
    return std::min(load_used(s), s.capacity);
  }
  __device__ static void copy_own(const hcl_log_ref& log, char* copy, std::uint64_t lo,
                                  std::uint64_t hi, std::uint64_t, unsigned active) {
    copy_span(log, copy, log.where().warp * log.region_bytes() + lo * line_bytes,
              (hi - lo) * line_bytes, active);
  }
};

// conv_log: a thread logs to its block's partition (linear block index modulo the partitions,
// as gpmlog's default partition); in the recovery kernel thread i rolls back partition i.
// Logging kernels may have any shape.
template <>
struct undo_streams<conv_log> : log_data<conv_log_ref> {
  using ref_type = conv_log_ref;
  using shape = conv_partitions;
  static constexpr std::uint32_t recovery_threads = 128;
  static conv_log create(pool& p, std::string_view name, const shape& s) {
    return conv_log::create(p, name, s.partitions, s.bytes_per_partition);
  }
  static std::uint64_t object_bytes(const shape& s) {
    return conv_log::object_bytes(s.partitions, s.bytes_per_partition);
  }
  template <class F>
  __device__ static log_status logging(const conv_log_ref& log, F&& f) {
    const std::uint64_t block =
        blockIdx.x +
        std::uint64_t{gridDim.x} * (blockIdx.y + std::uint64_t{gridDim.y} * blockIdx.z);
    return log.locked(static_cast<std::uint32_t>(block % log.partitions()), f);
  }
  template <class F>
  __device__ static log_status rolling_back(const conv_log_ref& log, F&& f) {
    const std::uint64_t partition = tile_index();
    if (partition >= log.partitions()) return log_status::ok;
    return log.locked(static_cast<std::uint32_t>(partition), f);
  }
  __device__ static log_status report(const conv_log_ref& log, log_status s) {
    return log.v_.report(s, ~std::uint64_t{0});
  }
  static dim3 grid(const conv_log& log) {
    return dim3((log.partitions() + recovery_threads - 1) / recovery_threads);
  }
  static dim3 block(const conv_log& log) {
    return dim3(std::min(log.partitions(), recovery_threads));
  }

  // As for hcl_log; the recovery kernel's thread i rolls back partition i, so a warp copies
  // chunks [lo, hi) of its lanes' partitions one after another, each below its own tail (`used`,
  // the lane's own_chunks). A partition is long and a warp's lanes copy one at a time: a bigger
  // step than HCL's.
  static constexpr std::uint64_t copy_step_chunks = 1024;  // 4 KiB a lane
  __device__ static std::uint64_t own_chunks(const conv_log_ref& log) {
    const std::uint64_t mine = tile_index();
    if (mine >= log.partitions()) return 0;
    auto* control = reinterpret_cast<partition_control*>(log.v_.control(mine));
    const stream_ref s{&control->tail, log.v_.stream_chunks, log.v_.generation(), mine};
    return std::min(load_used(s), s.capacity);
  }
  __device__ static void copy_own(const conv_log_ref& log, char* copy, std::uint64_t lo,
                                  std::uint64_t hi, std::uint64_t used, unsigned active) {
    const std::uint64_t mine = tile_index();
    const std::uint64_t partition_chunks = log.v_.stream_chunks;
    for (unsigned m = active; m != 0; m &= m - 1) {
      const int lane = __ffs(static_cast<int>(m)) - 1;
      const std::uint64_t p = __shfl_sync(active, mine, lane);
      const std::uint64_t end = std::min(hi, __shfl_sync(active, used, lane));
      if (end > lo) {
        copy_span(log, copy, (p * partition_chunks + lo) * chunk_bytes, (end - lo) * chunk_bytes,
                  active);
      }
    }
  }
};

// Every undo entry starts with 4 chunks: the pool offset of the range (low, high word), its
// size, and a zero; the old bytes follow.
inline constexpr std::uint64_t undo_record_chunks = 4;

// Writes an entry's old bytes back with the widest aligned stores they allow: the chunks of each
// 16-byte aligned window are gathered and stored at once (16, 8 or 4 bytes a store), bytes that
// are not whole aligned chunks one by one. Restored 4 bytes a store, a 16-byte gpKVS slot cost 4
// PCIe write transactions, and roll-back ran at the host's transaction rate.
struct restore_writer {
  unsigned char* target;
  std::uint64_t bytes;
  std::uintptr_t window = 0;  // the 16-byte aligned address the gathered words belong to
  std::uint32_t w0 = 0, w1 = 0, w2 = 0, w3 = 0;  // its words (not an array: kept in registers)
  std::uint32_t filled = 0;                       // bit i: word i is gathered

  // The chunk of the old bytes at offset `pos` (a multiple of chunk_bytes) in the range.
  GPM_HOST_DEVICE void put(std::uint64_t pos, std::uint32_t c) {
    const auto a = reinterpret_cast<std::uintptr_t>(target + pos);
    if (pos + chunk_bytes > bytes || a % chunk_bytes != 0) {
      for (std::uint64_t i = 0; i < chunk_bytes && pos + i < bytes; ++i) {
        target[pos + i] = static_cast<unsigned char>(c >> (8 * i));
      }
      return;
    }
    const std::uintptr_t w = a & ~std::uintptr_t{15};
    if (w != window) {
      flush();
      window = w;
    }
    const auto i = static_cast<std::uint32_t>((a - w) / chunk_bytes);
    w0 = i == 0 ? c : w0;
    w1 = i == 1 ? c : w1;
    w2 = i == 2 ? c : w2;
    w3 = i == 3 ? c : w3;
    filled |= 1u << i;
  }
  GPM_HOST_DEVICE void flush() {
    auto* base = reinterpret_cast<unsigned char*>(window);
    if (filled == 0xf) {
      store_bytes_as(base, uint4{w0, w1, w2, w3});
    } else {
      store_half(base, filled & 3u, w0, w1);
      store_half(base + 2 * chunk_bytes, filled >> 2 & 3u, w2, w3);
    }
    filled = 0;
  }
  // The gathered words of one 8-byte half of the window (`which`: bit 0 low word, bit 1 high).
  GPM_HOST_DEVICE static void store_half(unsigned char* at, std::uint32_t which, std::uint32_t lo,
                                         std::uint32_t hi) {
    if (which == 3u) {
      store_bytes_as(at, std::uint64_t{lo} | std::uint64_t{hi} << 32);
      return;
    }
    if (which & 1u) store_bytes_as(at, lo);
    if (which & 2u) store_bytes_as(at + chunk_bytes, hi);
  }
};

// Where a stream's roll-back stands between the steps of roll_back_step.
struct roll_back_cursor {
  std::uint64_t end = 0;  // the newest entry not yet restored ends before chunk `end`
  bool started = false;   // `end` was read from the stream's tail
  bool done = false;      // every entry is restored, or the stream stopped at a damaged one
};

// Rolls back one stream, newest entry first, restoring each entry's old bytes into the pool
// and persisting them (each entry's range, which is what recover() relies on before it clears
// the mark; on a GPU one __threadfence_system after the stream's last entry: a fence per entry
// made each thread wait a PCIe round trip per entry); the stream itself is left as it is. A word
// saved by two entries of the stream ends with the older entry's bytes: the thread's stores to
// one address reach memory in program order, so no fence is needed between them.
// In steps: a step restores the entries that lie at or above chunk `lo` and returns, leaving the
// cursor at the first entry that does not (lo 0: every entry; the recovery kernel lowers lo as it
// copies the log); it returns ok until the step that finishes the stream.
// corrupt: an entry failed its checksum or names bytes outside the pool (the stream stops before
// applying it).
template <class Layout>
__device__ log_status roll_back_step(const Layout& at, const stream_ref& s, const pool_ref& pool,
                                     std::uint64_t lo, roll_back_cursor& c) {
  if (c.done) return log_status::ok;
  if (!c.started) {
    c.end = load_used(s);
    c.started = true;
  }
  log_status result = log_status::ok;
  while (c.end != 0) {
    if (lo != 0 && c.end < lo + trailer_chunks) return log_status::ok;  // trailer not there yet
    const entry e = entry_ending_at(at, s, c.end);
    const std::uint64_t head_bytes = undo_record_chunks * chunk_bytes;
    if (e.status != log_status::ok || e.bytes < head_bytes) {
      result = e.status != log_status::ok ? e.status : log_status::corrupt;
      break;
    }
    if (e.begin < lo) return log_status::ok;
    // First pass: checksum and the record; nothing is written unless the entry is intact.
    std::uint32_t head[undo_record_chunks] = {};
    result = walk(at, s, e, [&](std::uint64_t k, std::uint32_t c) {
      if (k < undo_record_chunks) head[k] = c;
    });
    if (result != log_status::ok) break;
    const std::uint64_t offset = head[0] | std::uint64_t{head[1]} << 32;
    const std::uint64_t bytes = head[2];
    if (bytes != e.bytes - head_bytes || head[3] != 0 || !pool.contains(offset, bytes)) {
      result = log_status::corrupt;
      break;
    }
    // Second pass: restore the old bytes.
    unsigned char* target = pool.ptr<unsigned char>(offset);
    // (The checksum passed: no need to fold the chunks again.)
    restore_writer out{target, bytes};
    const std::uint64_t n = chunks_for(e.bytes);
    for (std::uint64_t k = undo_record_chunks; k < n; ++k) {
      out.put((k - undo_record_chunks) * chunk_bytes, *at.chunk(e.begin + k));
    }
    out.flush();
    gpm::persist_later_at("undo_tx.roll_back.data", target, bytes);
    c.end = e.begin;
  }
  c.done = true;
  gpm::persist_named_at("undo_tx.roll_back.data");  // the entries restored before any failure
  return result;
}

}  // namespace detail::log

// The device view: trivially copyable, taken by value by kernels.
template <class Log>
class basic_undo_tx_ref {
  using streams = detail::log::undo_streams<Log>;

 public:
  using log_ref_type = typename streams::ref_type;

  basic_undo_tx_ref() = default;

  // Logs the current `bytes` bytes at p (which must lie in the pool) as the newest undo entry of
  // the calling thread's stream, durably. Then the caller may update them in place.
  // bad_address: p is outside the pool; full: the stream has no room (nothing may be updated
  // then); wrong_geometry (undo_tx): the kernel's shape is not the log's.
  __device__ log_status save(const void* p, std::uint32_t bytes) const {
    const std::uint64_t offset = pool_.offset_of(p);
    if (!pool_.contains(offset, bytes)) return streams::report(log_, log_status::bad_address);
    const std::uint32_t head[detail::log::undo_record_chunks] = {
        static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32), bytes, 0};
    return streams::logging(log_, [&](const auto& at, const auto& s) {
      return detail::log::append(
          at, s,
          detail::log::byte_source{
              {reinterpret_cast<const unsigned char*>(head), static_cast<const unsigned char*>(p)},
              {sizeof head, bytes}});
    });
  }
  // save(p, sizeof(T)), then *p = value, then gpm::persist(). On failure *p is left unchanged.
  template <class T>
  __device__ log_status update(T* p, const T& value) const {
    const log_status st = save(p, sizeof(T));
    if (st != log_status::ok) return st;
    *p = value;
    gpm::persist_at("undo_tx.update.data", p, sizeof(T));
    return log_status::ok;
  }

  using roll_back_cursor = detail::log::roll_back_cursor;  // where roll_back(lo, c) stands

  // In a kernel launched with the transaction's grid() and block(): rolls back the calling
  // thread's share of the log (undo_tx: its own stream; conv_undo_tx: partition
  // gpm::tile_index(), if there is one), newest entry first, and persists what it restored. The
  // log itself is left as it is (recover() truncates it once every stream is done), so running
  // it again restores the same bytes. corrupt: an entry failed its checksum or names bytes
  // outside the pool; the stream then stops before applying it.
  __device__ log_status roll_back() const {
    roll_back_cursor c;
    return roll_back(0, c);
  }
  // The same in steps, as recovery runs it while it copies the log piece by piece: restores the
  // entries at or above chunk `lo` of the thread's stream from where `c` stands (a new cursor:
  // the newest entry), then returns, `c` marking where to go on. ok until the step that ends the
  // stream (c.done), which returns what roll_back() would.
  __device__ log_status roll_back(std::uint64_t lo, roll_back_cursor& c) const {
    const pool_ref pool = pool_;
    return streams::rolling_back(log_, [&](const auto& at, const auto& s) {
      return detail::log::roll_back_step(at, s, pool, lo, c);
    });
  }

  GPM_HOST_DEVICE const log_ref_type& log() const { return log_; }

 private:
  friend class basic_undo_tx<Log>;
  basic_undo_tx_ref(const log_ref_type& log, const pool_ref& pool) : log_(log), pool_(pool) {}

  log_ref_type log_;
  pool_ref pool_;
};

// The host object: the batch record (a pool object `name`) and its log (`name` + ".log"). The
// pool must outlive it. Host operations must not run while a kernel uses the transaction.
template <class Log>
class basic_undo_tx {
  using streams = detail::log::undo_streams<Log>;

 public:
  using log_type = Log;
  using ref_type = basic_undo_tx_ref<Log>;
  using shape_type = typename streams::shape;  // hcl_geometry or conv_partitions

  // Log bytes that one save of `bytes` bytes takes (its 16-byte record, the bytes, the log's
  // trailer), for sizing bytes_per_thread or bytes_per_partition.
  static constexpr std::uint64_t entry_footprint(std::uint64_t bytes) {
    return Log::entry_footprint(detail::log::undo_record_chunks * detail::log::chunk_bytes + bytes);
  }
  // Pool space the record and a log of this shape occupy (the pool needs a little more).
  static std::uint64_t object_bytes(const shape_type& shape);

  // Creates the batch record `name` and its log `name` + ".log" of the given shape. Errors as
  // hcl_log::create or conv_log::create; errc::already_exists if `name` is taken.
  static basic_undo_tx create(pool& p, std::string_view name, const shape_type& shape);
  // Opens both after a restart or crash, validating them (errc::layout_mismatch if the log is
  // the other kind). Does not recover: call recover().
  static basic_undo_tx open(pool& p, std::string_view name);

  // Starts a batch: truncates the log, then persists the active mark. Throws
  // errc::invalid_argument if a batch is already active (commit or recover it first).
  void begin();
  // Ends the batch: checks that no logging operation failed (else throws gpm::error and leaves
  // the batch active, for recover()), persists the cleared mark, then truncates the log.
  void commit();
  // If a batch is active: undoes it on the GPU (launching on `stream` with grid() and block()
  // and waiting for it), then ends it. Returns whether a batch was undone. Also finishes a commit
  // a crash interrupted (truncates the log). Throws errc::corrupt if an undo entry is damaged
  // (the data is then left partly restored, the batch stays active and the log is kept).
  bool recover(cudaStream_t stream = nullptr);
  // What the last recover() of this object did and how long each phase took.
  const undo_recovery& last_recovery() const { return last_recovery_; }
  bool active() const;
  // Batches committed since the record was created (an undone batch does not count), so after
  // recover() the data is the state the committed()-th batch left.
  std::uint64_t committed() const;

  ref_type ref() const;
  // The launch shape of the recovery kernel, which roll_back() needs. For an undo_tx it is the
  // log's geometry, the shape every kernel using ref() must have; a conv_undo_tx's logging
  // kernels may have any shape, its recovery has a thread per partition.
  dim3 grid() const { return streams::grid(log_); }
  dim3 block() const { return streams::block(log_); }
  const Log& log() const { return log_; }
  const std::string& name() const { return name_; }

 private:
  basic_undo_tx(pool& p, std::string name, std::uint64_t record_offset, Log log);
  void roll_back(cudaStream_t stream);
  std::uint64_t* mark() const;
  void set_mark(std::uint64_t value, const char* site);  // stores and persists at `site`

  pool* pool_;
  std::string name_;
  std::uint64_t record_offset_;
  Log log_;
  undo_recovery last_recovery_;
  // Recovery's copy of the log in GPU memory, allocated by the first recovery that needs it and
  // kept for the next ones: on an H200 its cudaFree at the end of a recovery took 1.2 s at times
  // (docs/logging.md, "Recovery reads a copy of the log").
  std::unique_ptr<void, cudaError_t (*)(void*)> copy_{nullptr, cudaFree};
};

// Defined in src/log/undo_tx.cu for the two logs.
extern template class basic_undo_tx<hcl_log>;
extern template class basic_undo_tx<conv_log>;

using undo_tx = basic_undo_tx<hcl_log>;
using undo_tx_ref = basic_undo_tx_ref<hcl_log>;
using conv_undo_tx = basic_undo_tx<conv_log>;
using conv_undo_tx_ref = basic_undo_tx_ref<conv_log>;
static_assert(std::is_trivially_copyable_v<undo_tx_ref>);
static_assert(std::is_trivially_copyable_v<conv_undo_tx_ref>);

}  // namespace gpm
