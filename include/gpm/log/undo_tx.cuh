// gpm::undo_tx: failure-atomic batches of in-place updates to pool data, made with undo logging
// on an hcl_log (GPM, ASPLOS'22, §4.1 and Figure 6). The host marks a batch active (persisted);
// kernels log the old bytes of each range before updating it in place; the host commits (clears
// the mark, truncates the log). After a crash, recover() undoes an interrupted batch on the GPU,
// every thread rolling back its own log newest-first in parallel, so the data is exactly as it
// was before the batch. Recovery is idempotent: a crash during recover(), then recover() again,
// gives the same state.
//
// Rule: within one batch, a given byte must be updated through one thread slot (block, thread
// of the recorded geometry) only, e.g. the thread that owns an array element; slots roll back
// independently, so two slots logging the same byte would restore it in no defined order.
//
//   gpm::undo_tx tx = gpm::undo_tx::create(pool, "balances", {blocks, threads, 16 * 64});
//   tx.recover();                            // at start-up: undo a batch a crash interrupted
//   tx.begin();
//   gpm::launch(pay, tx.grid(), tx.block(), 0, nullptr, tx.ref(), pool.ref(), accounts_off);
//   tx.commit();                             // throws if any update failed; then tx.recover()
//
//   __global__ void pay(gpm::undo_tx_ref tx, gpm::pool_ref pool, std::uint64_t off) {
//     long* a = pool.ptr<long>(off) + blockIdx.x * blockDim.x + threadIdx.x;
//     if (tx.update(a, *a - 10) != gpm::log_status::ok) return;  // logged, stored, persisted
//   }
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <gpm/log/hcl_log.cuh>
#include <gpm/pool/pool_ref.hpp>

namespace gpm {

class undo_tx_ref {
 public:
  undo_tx_ref() = default;

  // Logs the current `bytes` bytes at p (which must lie in the pool) as this thread's newest
  // undo entry, durably. Then the caller may update them in place. bad_address: p is outside
  // the pool; full: the thread's log has no room (nothing may be updated then).
  __device__ log_status save(const void* p, std::uint32_t bytes) const {
    const std::uint64_t offset = pool_.offset_of(p);
    if (!pool_.contains(offset, bytes)) return log_.v_.report(log_status::bad_address, ~0ull);
    const std::uint32_t head[record_chunks] = {static_cast<std::uint32_t>(offset),
                                               static_cast<std::uint32_t>(offset >> 32), bytes, 0};
    return log_.with_thread([&](const auto& at, const auto& s) {
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
    gpm::persist(p, sizeof(T));
    return log_status::ok;
  }

  // Rolls back the calling thread's log, newest entry first, and persists what it restored; the
  // log itself is left as it is (undo_tx::recover truncates it once every thread is done), so
  // running it again restores the same bytes. corrupt: an entry failed its checksum or names
  // bytes outside the pool; the thread then stops before applying it.
  __device__ log_status roll_back() const;

  const hcl_log_ref& log() const { return log_; }

 private:
  friend class undo_tx;
  undo_tx_ref(const hcl_log_ref& log, const pool_ref& pool) : log_(log), pool_(pool) {}

  // Every undo entry starts with 4 chunks: the pool offset of the range (low, high word), its
  // size, and a zero; the old bytes follow.
  static constexpr std::uint64_t record_chunks = 4;

  hcl_log_ref log_;
  pool_ref pool_;
};
static_assert(std::is_trivially_copyable_v<undo_tx_ref>);

class undo_tx {
 public:
  // Creates the batch record `name` and its undo log `name` + ".log" (an hcl_log of geometry g).
  // Errors as hcl_log::create.
  static undo_tx create(pool& p, std::string_view name, const hcl_geometry& g);
  // Opens both after a restart or crash, validating them. Does not recover: call recover().
  static undo_tx open(pool& p, std::string_view name);

  // Starts a batch: truncates the log, then persists the active mark. Throws
  // errc::invalid_argument if a batch is already active (commit or recover it first).
  void begin();
  // Ends the batch: checks that no logging operation failed (else throws gpm::error and leaves
  // the batch active, for recover()), persists the cleared mark, then truncates the log.
  void commit();
  // If a batch is active: undoes it on the GPU (launching on `stream` with the log's geometry and
  // waiting for it), then ends it. Returns whether a batch was undone. Also finishes a commit a
  // crash interrupted (truncates the log). Throws errc::corrupt if an undo entry is damaged (the
  // data is then left partly restored, the batch stays active and the log is kept).
  bool recover(cudaStream_t stream = nullptr);
  bool active() const;
  // Batches committed since the record was created (an undone batch does not count), so after
  // recover() the data is the state the committed()-th batch left.
  std::uint64_t committed() const;

  undo_tx_ref ref() const;
  dim3 grid() const { return log_.grid(); }
  dim3 block() const { return log_.block(); }
  const hcl_log& log() const { return log_; }
  const std::string& name() const { return name_; }

 private:
  undo_tx(pool& p, std::string name, std::uint64_t record_offset, hcl_log log);
  std::uint64_t* mark() const;
  void set_mark(std::uint64_t value);

  pool* pool_;
  std::string name_;
  std::uint64_t record_offset_;
  hcl_log log_;
};

// Defined here (not in a .cu file) so that applications can roll back from their own kernels.
__device__ inline log_status undo_tx_ref::roll_back() const {
  const pool_ref pool = pool_;
  return log_.with_thread([&](const auto& at, const auto& s) {
    namespace L = detail::log;
    for (std::uint64_t end = L::load_used(s); end != 0;) {
      const L::entry e = L::entry_ending_at(at, s, end);
      if (e.status != log_status::ok) return e.status;
      const std::uint64_t head_bytes = record_chunks * L::chunk_bytes;
      if (e.bytes < head_bytes) return log_status::corrupt;
      // First pass: checksum and the record; nothing is written unless the entry is intact.
      std::uint32_t head[record_chunks] = {};
      const log_status st = L::walk(at, s, e, [&](std::uint64_t k, std::uint32_t c) {
        if (k < record_chunks) head[k] = c;
      });
      if (st != log_status::ok) return st;
      const std::uint64_t offset = head[0] | std::uint64_t{head[1]} << 32;
      const std::uint64_t bytes = head[2];
      if (bytes != e.bytes - head_bytes || head[3] != 0 || !pool.contains(offset, bytes)) {
        return log_status::corrupt;
      }
      // Second pass: restore the old bytes.
      unsigned char* target = pool.ptr<unsigned char>(offset);
      L::walk(at, s, e, [&](std::uint64_t k, std::uint32_t c) {
        if (k < record_chunks) return;
        const std::uint64_t pos = (k - record_chunks) * L::chunk_bytes;
        if (pos + L::chunk_bytes <= bytes &&
            reinterpret_cast<std::uintptr_t>(target + pos) % L::chunk_bytes == 0) {
          store_bytes_as(target + pos, c);  // one store, not four
          return;
        }
        for (std::uint64_t i = 0; i < L::chunk_bytes && pos + i < bytes; ++i) {
          target[pos + i] = static_cast<unsigned char>(c >> (8 * i));
        }
      });
      end = e.begin;
    }
    gpm::persist();
    return log_status::ok;
  });
}

}  // namespace gpm
