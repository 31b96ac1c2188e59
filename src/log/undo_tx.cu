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
#include <cstring>
#include <memory>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/object_header.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm {
namespace {

namespace L = detail::log;

std::string log_name(std::string_view name) { return std::string(name) + ".log"; }

template <class Log>
__global__ void roll_back_kernel(basic_undo_tx_ref<Log> tx) {
  tx.roll_back();
}

// recover()'s copy of the log, in two kernels. The first finds, per region (a warp's rows of an
// hcl_log, a partition of a conv_log), the bytes its streams use: the largest tail of the
// region's lanes, read by a warp per region.
template <class Log>
__global__ void used_per_region_kernel(typename L::undo_streams<Log>::ref_type log,
                                       std::uint64_t* used) {
  using S = L::undo_streams<Log>;
  const auto warp = gpm::make_tile<L::warp_lanes>();
  for (std::uint64_t region : gpm::grid_stride<L::warp_lanes>(S::regions(log))) {
    const std::uint64_t u = gpm::tile_max(warp, S::used_bytes(log, region, warp.thread_rank()));
    if (warp.thread_rank() == 0) used[region] = u;
  }
}

// The second copies the used bytes into `copy`, at the same offsets, in 16-byte words (rounded
// out: a neighbour's bytes copied along are the same bytes). The whole grid sweeps the log in
// address order, so the words in flight at any moment lie close together: given a piece of a
// region each, the warps read thousands of places at once across the log, missing the GPU's
// translation cache on host memory at every load (an interrupted gpKVS batch's 0.75 GB log
// copied at about 1 GB/s on an H200, against 51 GB/s for a sweep).
template <class Log>
__global__ void copy_used_kernel(typename L::undo_streams<Log>::ref_type log,
                                 const std::uint64_t* used, char* copy) {
  using S = L::undo_streams<Log>;
  const std::uint64_t region_bytes = S::region_bytes(log);
  const std::uint64_t regions = S::regions(log);
  const auto* src = reinterpret_cast<const ulonglong2*>(S::data(log));
  auto* dst = reinterpret_cast<ulonglong2*>(copy);
  // Whether [begin, end) of the data overlaps the used bytes of a region it touches.
  const auto in_use = [&](std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t r = begin / region_bytes;
    if (begin - r * region_bytes < used[r]) return true;
    const std::uint64_t next = (r + 1) * region_bytes;
    return end > next && r + 1 < regions && used[r + 1] > 0;
  };
  for (std::uint64_t w : gpm::grid_stride((regions * region_bytes + 15) / 16)) {
    if (in_use(w * 16, w * 16 + 16)) dst[w] = src[w];
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
  if (!active()) {
    if (!log_.is_empty()) log_.clear();  // a commit cut short between its two steps
    return false;
  }
  log_.clear_faults();  // failures of the interrupted batch are not recovery's
  roll_back(stream);
  log_.check_faults();
  crash_point("undo_tx.recover.rolled_back");
  set_mark(committed() << 1, "undo_tx.recover.mark");
  crash_point("undo_tx.recover.unmarked");
  log_.clear();
  return true;
}

// Every stream rolls back reading its entries from a copy of the log's used lines in GPU memory.
// Read from the pool, each stream's thread fetched its entries across PCIe 4 bytes at a time,
// twice (checksum, then restore), a read request each; the copy reads whole lines. On an H200
// this halved an interrupted gpDB UPDATE batch's recovery (docs/benchmarks.md). Without GPU
// memory for the copy, from the pool as before.
template <class Log>
void basic_undo_tx<Log>::roll_back(cudaStream_t stream) const {
  const auto log = log_.ref();
  const std::uint64_t copy_bytes = (streams::data_bytes(log) + 15) / 16 * 16;
  void* copy = nullptr;
  if (cudaMalloc(&copy, copy_bytes + streams::regions(log) * sizeof(std::uint64_t)) !=
      cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: the direct path below works without it
    copy = nullptr;
  }
  const std::unique_ptr<void, cudaError_t (*)(void*)> owned(copy, cudaFree);
  if (copy == nullptr) {
    launch(roll_back_kernel<Log>, grid(), block(), 0, stream, ref());
  } else {
    // The region table sits after the copy (16-byte words), in the same allocation.
    auto* used = reinterpret_cast<std::uint64_t*>(static_cast<char*>(copy) + copy_bytes);
    // Grids the device runs at once: a later wave of blocks would start its sweep elsewhere.
    constexpr std::uint32_t threads = 256;
    launch(used_per_region_kernel<Log>, resident_blocks(used_per_region_kernel<Log>, threads),
           threads, 0, stream, log, used);
    launch(copy_used_kernel<Log>, resident_blocks(copy_used_kernel<Log>, threads), threads, 0,
           stream, log, used, static_cast<char*>(copy));
    launch(roll_back_kernel<Log>, grid(), block(), 0, stream,
           ref_type(streams::reading(log, static_cast<char*>(copy)), pool_->ref()));
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after undo_tx recovery");
}

template class basic_undo_tx<hcl_log>;
template class basic_undo_tx<conv_log>;

}  // namespace gpm
