// The host side of the workloads' undo logs (undo_logs.cuh): conv_undo_batch's begin / commit /
// recover around a gpm::conv_log, and flat_undo, the CPU-persisted log of gpm-ndp and cpu.
#include "workloads/common/undo_logs.cuh"

#include <algorithm>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/kernel.cuh>

#include "workloads/common/object_header.hpp"

namespace gpmbench {

namespace {

constexpr std::uint64_t kConvMagic = 0x31564e4355425047ull;  // "GPBUCNV1"
constexpr std::uint64_t kFlatMagic = 0x3154414c46425047ull;  // "GPBFLAT1"
constexpr std::uint64_t kVersion = 1;

std::string log_name(std::string_view name) { return std::string(name) + ".log"; }

// Marks are written by the host: a store and a write-back make them durable.
void store_durably(std::uint64_t* word, std::uint64_t value) {
  *word = value;
  gpm::write_back(word, sizeof *word);
}

// One thread per partition restores its entries newest first; each restored range is persisted
// before its entry is removed, so a crash here leaves entries still to restore, never lost ones.
__global__ void conv_roll_back(conv_undo u, unsigned long long* damaged) {
  const std::uint32_t part = blockIdx.x * blockDim.x + threadIdx.x;
  if (part >= u.log.partitions()) return;
  unsigned char entry[sizeof(std::uint64_t) + kMaxUndoBytes];
  std::uint32_t bytes = 0;
  while (u.log.newest_size(part, bytes) == gpm::log_status::ok) {
    std::uint64_t offset = 0;
    if (bytes < sizeof offset || bytes > sizeof entry ||
        u.log.read(part, entry, bytes) != gpm::log_status::ok) {
      atomicAdd(damaged, 1ull);
      return;
    }
    std::memcpy(&offset, entry, sizeof offset);
    const std::uint32_t old_bytes = bytes - static_cast<std::uint32_t>(sizeof offset);
    if (!u.pool.contains(offset, old_bytes)) {
      atomicAdd(damaged, 1ull);
      return;
    }
    std::memcpy(u.pool.ptr<unsigned char>(offset), entry + sizeof offset, old_bytes);
    gpm::persist(u.pool.ptr<unsigned char>(offset), old_bytes);
    u.log.remove(part, bytes);
  }
}

}  // namespace

conv_undo_batch conv_undo_batch::create(gpm::pool& p, std::string_view name,
                                        std::uint32_t partitions,
                                        std::uint64_t bytes_per_partition) {
  gpm::conv_log log = gpm::conv_log::create(p, log_name(name), partitions, bytes_per_partition);
  const std::uint64_t offset =
      create_with_header(p, name, sizeof(std::uint64_t), kConvMagic, kVersion, {partitions, 0, 0});
  return conv_undo_batch(p, offset, std::move(log));
}

conv_undo_batch conv_undo_batch::open(gpm::pool& p, std::string_view name) {
  std::uint64_t offset = 0;
  open_with_header(p, name, kConvMagic, kVersion, "conventional undo batch record", offset,
                   [](const std::uint64_t(&)[3]) { return sizeof(std::uint64_t); });
  return conv_undo_batch(p, offset, gpm::conv_log::open(p, log_name(name)));
}

bool conv_undo_batch::active() const {
  return *pool_->host_ptr<std::uint64_t>(mark_offset_ + kObjectHeaderBytes) != 0;
}

void conv_undo_batch::set_active(bool on) {
  store_durably(pool_->host_ptr<std::uint64_t>(mark_offset_ + kObjectHeaderBytes), on ? 1 : 0);
}

void conv_undo_batch::begin() {
  if (active()) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "conv_undo_batch::begin: a batch is already active; commit it, or "
                     "recover() to undo it");
  }
  log_.clear();
  set_active(true);
}

void conv_undo_batch::commit() {
  log_.check_faults();  // a failed log insert leaves the batch active, for recover()
  set_active(false);
  log_.clear();
}

bool conv_undo_batch::recover(cudaStream_t stream) {
  if (!active()) return false;
  log_.clear_faults();  // failures of the interrupted batch are not recovery's
  gpm::device_buffer<unsigned long long> damaged(1);
  gpm::check_cuda(cudaMemset(damaged.data(), 0, damaged.bytes()), "cudaMemset");
  const std::uint32_t parts = log_.partitions();
  const unsigned threads = std::min(parts, 128u);
  gpm::launch(conv_roll_back, (parts + threads - 1) / threads, threads, 0, stream, ref(),
              damaged.data());
  gpm::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after conv recovery");
  unsigned long long bad = 0;
  gpm::check_cuda(cudaMemcpy(&bad, damaged.data(), sizeof bad, cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
  if (bad != 0) {
    gpm::throw_error(gpm::errc::corrupt,
                     "conv_undo_batch::recover: " + std::to_string(bad) + " partitions of log '" +
                         log_.name() +
                         "' hold a damaged undo entry; the data is partly restored and the "
                         "log kept; restore the pool from a snapshot");
  }
  gpm::crash_point("conv_undo.recover.rolled_back");
  set_active(false);
  log_.clear();
  return true;
}

// ---- flat_undo --------------------------------------------------------------------------------

namespace {
std::uint64_t words_bytes(std::uint64_t regions) { return ((1 + regions) * 8 + 127) / 128 * 128; }
std::uint64_t flat_data_bytes(std::uint64_t regions, std::uint64_t capacity,
                              std::uint64_t max_bytes) {
  return words_bytes(regions) + regions * capacity * (sizeof(flat_undo::entry_head) + max_bytes);
}
}  // namespace

flat_undo flat_undo::create(gpm::pool& p, std::string_view name, std::uint32_t regions,
                            std::uint64_t capacity, std::uint32_t max_bytes) {
  if (regions == 0 || capacity == 0 || max_bytes == 0 || max_bytes % 8 != 0 ||
      max_bytes > kMaxUndoBytes) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "flat_undo::create: needs at least one region and entry, and entries of a "
                     "multiple of 8 bytes up to " +
                         std::to_string(kMaxUndoBytes));
  }
  const std::uint64_t offset =
      create_with_header(p, name, flat_data_bytes(regions, capacity, max_bytes), kFlatMagic,
                         kVersion, {regions, capacity, max_bytes});
  return flat_undo(p, offset, regions, capacity, max_bytes);
}

flat_undo flat_undo::open(gpm::pool& p, std::string_view name) {
  std::uint64_t offset = 0;
  const object_header h = open_with_header(
      p, name, kFlatMagic, kVersion, "flat undo log", offset,
      [](const std::uint64_t(&s)[3]) { return flat_data_bytes(s[0], s[1], s[2]); });
  if (h.sizes[0] == 0 || h.sizes[0] > ~std::uint32_t{0} || h.sizes[2] % 8 != 0 ||
      h.sizes[2] > kMaxUndoBytes) {
    gpm::throw_error(gpm::errc::corrupt, "pool object '" + std::string(name) +
                                             "': the flat undo log header names impossible "
                                             "sizes; recreate it");
  }
  return flat_undo(p, offset, static_cast<std::uint32_t>(h.sizes[0]), h.sizes[1],
                   static_cast<std::uint32_t>(h.sizes[2]));
}

std::uint64_t* flat_undo::words() const {
  return pool_->host_ptr<std::uint64_t>(offset_ + kObjectHeaderBytes);
}
std::uint64_t flat_undo::entries_offset() const {
  return offset_ + kObjectHeaderBytes + words_bytes(regions_);
}
unsigned char* flat_undo::device_entry(std::uint32_t region, std::uint64_t i) const {
  return pool_->ref().ptr<unsigned char>(entries_offset()) +
         (region * capacity_ + i) * entry_bytes();
}
unsigned char* flat_undo::host_entry(std::uint32_t region, std::uint64_t i) const {
  return pool_->host_ptr<unsigned char>(entries_offset()) +
         (region * capacity_ + i) * entry_bytes();
}

bool flat_undo::active() const { return words()[0] != 0; }

void flat_undo::begin() {
  if (active()) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "flat_undo::begin: a batch is already active; commit it, or recover() it");
  }
  std::fill(words() + 1, words() + 1 + regions_, 0);
  gpm::write_back(words() + 1, regions_ * sizeof(std::uint64_t));
  store_durably(words(), 1);
}

std::uint64_t flat_undo::save(std::uint32_t region, const void* p, std::uint32_t bytes) {
  std::uint64_t& count = words()[1 + region];
  if (count == capacity_ || bytes > max_bytes_) {
    gpm::throw_error(gpm::errc::out_of_memory,
                     "flat_undo::save: region " + std::to_string(region) + " holds " +
                         std::to_string(capacity_) + " entries of up to " +
                         std::to_string(max_bytes_) + " bytes; create the log larger");
  }
  unsigned char* e = host_entry(region, count);
  const entry_head head{pool_->host_ref().offset_of(p), bytes};
  std::memcpy(e, &head, sizeof head);
  std::memcpy(e + sizeof head, p, bytes);
  gpm::write_back(e, sizeof head + bytes);
  store_durably(&count, count + 1);  // the entry is durable before it is counted
  return sizeof head + bytes + sizeof count;
}

void flat_undo::publish(std::uint32_t region, std::uint64_t count) {
  store_durably(&words()[1 + region], std::min(count, capacity_));
}

void flat_undo::commit() { store_durably(words(), 0); }

bool flat_undo::recover() {
  if (!active()) return false;
  const gpm::pool_ref pool = pool_->host_ref();
  for (std::uint32_t r = 0; r < regions_; ++r) {
    for (std::uint64_t i = std::min(words()[1 + r], capacity_); i-- > 0;) {
      const unsigned char* e = host_entry(r, i);
      entry_head head;
      std::memcpy(&head, e, sizeof head);
      if (head.bytes == 0) continue;  // an operation that changed nothing
      if (head.bytes > max_bytes_ || !pool.contains(head.offset, head.bytes)) {
        gpm::throw_error(gpm::errc::corrupt, "flat_undo::recover: entry " + std::to_string(i) +
                                                 " of region " + std::to_string(r) +
                                                 " names bytes outside the pool; restore the "
                                                 "pool from a snapshot");
      }
      std::memcpy(pool.ptr<unsigned char>(head.offset), e + sizeof head, head.bytes);
      gpm::write_back(pool.ptr<unsigned char>(head.offset), head.bytes);
    }
  }
  gpm::crash_point("flat_undo.recover.restored");
  commit();
  return true;
}

}  // namespace gpmbench
