// gpm::basic_undo_tx host side, for both logs (undo_tx on an hcl_log, conv_undo_tx on a
// conv_log): the batch record (an active mark persisted in the pool) and the begin / commit /
// recover protocol around the log of undo entries. Order of persisted steps:
//   begin:   truncate the log; persist mark = active             (the log is empty when marked)
//   commit:  persist mark = inactive, committed + 1; truncate the log  (inactive: nothing to undo)
//   recover: if active: roll every stream back (GPU); persist mark = inactive; truncate the log
// A crash between any two steps leaves a state recover() handles: an active mark always comes
// with a log holding exactly the batch's undo entries, and rolling back twice restores the same
// bytes, because the log is truncated only after the mark is cleared.
//
// Persist sites (gpm::persist_at; docs/crash-checking.md), caught when removed by
// tests/log/log_crash_image_test.cu (the log's own sites are listed in log_object.cu):
//   undo_tx.create.header    a new batch record's header, last: until durable, open() refuses it
//   undo_tx.begin.mark       the active mark, after the log is truncated and before any update
//   undo_tx.update.data      an updated range, before commit's mark can cover it (undo_tx.cuh)
//   undo_tx.commit.mark      the cleared mark and committed count, before the log is truncated
//   undo_tx.roll_back.data   each range recovery restored, before recover() clears the mark
//                            (undo_tx.cuh)
//   undo_tx.recover.mark     the cleared mark once a batch is undone, before the log is truncated
#include <gpm/log/undo_tx.cuh>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/elapsed.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/object_header.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm {
namespace {

namespace L = detail::log;

std::string log_name(std::string_view name) { return std::string(name) + ".log"; }

// Rolls the log back (basic_undo_tx_ref::roll_back); with a copy, each warp copies its own
// streams' used chunks into it a step at a time, newest first (undo_streams::copy_own), and its
// lanes restore the entries each step completes before the warp copies the next: the restores
// (posted stores to the pool) go out while the next step's lines come in. Copying the whole of a
// warp's lines first made the warps resident together (the kernel's blocks run in waves) read
// together, then restore together.
template <class Log>
__global__ void recover_kernel(basic_undo_tx_ref<Log> tx, basic_undo_tx_ref<Log> from_copy,
                               char* copy) {
  if (copy == nullptr) {
    tx.roll_back();
    return;
  }
  using streams = L::undo_streams<Log>;
  const unsigned active = __activemask();
  const std::uint64_t used = streams::own_chunks(tx.log());
  std::uint64_t hi = used;  // the warp's highest used chunk: what is left to copy lies below
  for (unsigned m = active; m != 0; m &= m - 1) {
    hi = std::max(hi, __shfl_sync(active, used, __ffs(static_cast<int>(m)) - 1));
  }
  typename basic_undo_tx_ref<Log>::roll_back_cursor cursor;
  cursor.done = used == 0;  // nothing to restore (or no stream: a conv_undo_tx thread past them)
  while (hi != 0) {
    const std::uint64_t lo = hi > streams::copy_step_chunks ? hi - streams::copy_step_chunks : 0;
    streams::copy_own(tx.log(), copy, lo, hi, used, active);
    __syncwarp(active);
    from_copy.roll_back(lo, cursor);
    hi = __any_sync(active, !cursor.done) ? lo : 0;
  }
}

}  // namespace

template <class Log>
basic_undo_tx<Log>::basic_undo_tx(pool& p, std::string name, std::uint64_t record_offset, Log log)
    : pool_(&p), name_(std::move(name)), record_offset_(record_offset), log_(std::move(log)) {}

template <class Log>
std::uint64_t basic_undo_tx<Log>::object_bytes(const shape_type& shape) {
  return streams::object_bytes(shape) + L::undo_record_bytes;
}

template <class Log>
basic_undo_tx<Log> basic_undo_tx<Log>::create(pool& p, std::string_view name,
                                              const shape_type& shape) {
  if (p.find(name)) {
    throw_error(errc::already_exists, "pool " + p.path() + " already holds an object named '" +
                                          std::string(name) + "'; open the undo_tx instead");
  }
  Log log = streams::create(p, log_name(name), shape);
  const std::uint64_t off = p.allocate(name, L::undo_record_bytes, L::line_bytes);
  char* base = p.host_ptr<char>(off);
  L::undo_record_header h{};
  h.common = format::make_header(L::kUndoRecordKind, L::undo_record_bytes);
  format::seal_header(&h);
  // The mark is zero (allocation zero-fills); the header goes last so that open() rejects a
  // record whose creation a crash interrupted.
  std::memcpy(base, &h, sizeof h);
  persist_at("undo_tx.create.header", base, sizeof h);
  return basic_undo_tx(p, std::string(name), off, std::move(log));
}

template <class Log>
basic_undo_tx<Log> basic_undo_tx<Log>::open(pool& p, std::string_view name) {
  const std::string what = "undo_tx '" + std::string(name) + "' in pool " + p.path();
  const pool_object record = p.open_object(name, L::kUndoRecordKind, what);
  if (record.bytes != L::undo_record_bytes) {
    throw_error(errc::corrupt, what + " is " + std::to_string(record.bytes) + " bytes, not " +
                                   std::to_string(L::undo_record_bytes) + "; it is damaged");
  }
  return basic_undo_tx(p, std::string(name), record.offset, Log::open(p, log_name(name)));
}

template <class Log>
std::uint64_t* basic_undo_tx<Log>::mark() const {
  return pool_->host_ptr<std::uint64_t>(record_offset_ + L::undo_mark_offset);
}

template <class Log>
void basic_undo_tx<Log>::set_mark(std::uint64_t value, const char* site) {
  std::atomic_ref<std::uint64_t>(*mark()).store(value);
  persist_at(site, mark(), sizeof(std::uint64_t));
}

template <class Log>
bool basic_undo_tx<Log>::active() const {
  return (std::atomic_ref<std::uint64_t>(*mark()).load() & 1) != 0;
}

template <class Log>
std::uint64_t basic_undo_tx<Log>::committed() const {
  return std::atomic_ref<std::uint64_t>(*mark()).load() >> 1;
}

template <class Log>
typename basic_undo_tx<Log>::ref_type basic_undo_tx<Log>::ref() const {
  return ref_type(log_.ref(), pool_->ref());
}

template <class Log>
void basic_undo_tx<Log>::begin() {
  require(!active(),
          "undo_tx '" + name_ + "': a batch is already active; commit it, or recover() to undo it");
  log_.clear();
  log_.clear_faults();
  crash_point("undo_tx.begin.log_cleared");
  set_mark((committed() << 1) | 1, "undo_tx.begin.mark");
}

template <class Log>
void basic_undo_tx<Log>::commit() {
  require(active(), "undo_tx '" + name_ + "': commit without an active batch; call begin() first");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before undo_tx::commit");
  // A failed save means some update of the batch was skipped: the batch must not commit.
  log_.check_faults();
  set_mark((committed() + 1) << 1, "undo_tx.commit.mark");
  crash_point("undo_tx.commit.unmarked");
  log_.clear();
}

template <class Log>
bool basic_undo_tx<Log>::recover(cudaStream_t stream) {
  const auto start = std::chrono::steady_clock::now();
  last_recovery_ = undo_recovery{};
  const auto finish = [&](bool undone) {
    last_recovery_.undone = undone;
    last_recovery_.seconds = seconds_since(start);
    return undone;
  };
  if (!active()) {
    if (!log_.is_empty()) log_.clear();  // a commit cut short between its two steps
    return finish(false);
  }
  log_.clear_faults();  // failures of the interrupted batch are not recovery's
  roll_back(stream);
  log_.check_faults();
  crash_point("undo_tx.recover.rolled_back");
  set_mark(committed() << 1, "undo_tx.recover.mark");
  crash_point("undo_tx.recover.unmarked");
  log_.clear();
  return finish(true);
}

// Every stream rolls back reading its entries from a copy of the log's used lines in GPU memory.
// Read from the pool, each stream's thread fetched its entries across PCIe 4 bytes at a time,
// twice (checksum, then restore), a read request each; the copy reads whole lines. On an H200
// this halved an interrupted gpDB UPDATE batch's recovery (docs/benchmarks.md). The copy is made
// in the recovery kernel itself, each warp its own lines before rolling them back (a separate copy
// kernel first made the roll-back wait for the whole log). Without GPU memory for the copy, from
// the pool as before. The copy's memory is kept for later recoveries (copy_). Each phase waits
// for its work, so that last_recovery() can say where the time went (a recovery is synchronous
// anyway).
template <class Log>
void basic_undo_tx<Log>::roll_back(cudaStream_t stream) {
  const auto log = log_.ref();
  auto start = std::chrono::steady_clock::now();
  if (!copy_) {  // the log's data size is fixed for the object's life
    void* p = nullptr;
    if (cudaMalloc(&p, streams::data_bytes(log)) == cudaSuccess) {
      copy_.reset(p);
    } else {
      (void)cudaGetLastError();  // not sticky: the direct path below works without it
    }
  }
  char* copy = static_cast<char*>(copy_.get());
  last_recovery_.from_copy = copy != nullptr;
  last_recovery_.allocate_seconds = seconds_since(start);
  const ref_type from_copy(streams::reading(log, copy), pool_->ref());
  start = std::chrono::steady_clock::now();
  launch(recover_kernel<Log>, grid(), block(), 0, stream, ref(), from_copy, copy);
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after undo_tx recovery");
  last_recovery_.kernel_seconds = seconds_since(start);
}

template class basic_undo_tx<hcl_log>;
template class basic_undo_tx<conv_log>;

}  // namespace gpm
