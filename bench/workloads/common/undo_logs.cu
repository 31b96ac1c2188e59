// The host side of flat_undo (undo_logs.cuh), the CPU-persisted log of gpm-ndp and cpu.
#include "workloads/common/undo_logs.cuh"

#include <algorithm>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/error.hpp>

#include "workloads/common/object_header.hpp"

namespace gpmbench {

namespace {

constexpr gpm::format::object_kind kFlatKind = bench_kind("flat undo log", "GPBFLAT1");

// Marks are written by the host: a store and a write-back make them durable.
void store_durably(std::uint64_t* word, std::uint64_t value) {
  *word = value;
  gpm::write_back(word, sizeof *word);
}

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
      create_with_header(p, name, flat_data_bytes(regions, capacity, max_bytes), kFlatKind,
                         {regions, capacity, max_bytes});
  return flat_undo(p, offset, regions, capacity, max_bytes);
}

flat_undo flat_undo::open(gpm::pool& p, std::string_view name) {
  std::uint64_t offset = 0;
  const object_header h = open_with_header(
      p, name, kFlatKind, offset,
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

std::uint64_t flat_undo::write_back_targets(std::uint32_t region, std::uint64_t begin,
                                            std::uint64_t end) const {
  std::uint64_t bytes = 0;
  for (std::uint64_t i = begin; i < end; ++i) {
    entry_head head;
    std::memcpy(&head, host_entry(region, i), sizeof head);
    gpm::write_back(pool_->host_ptr<unsigned char>(head.offset), head.bytes);
    bytes += head.bytes;
  }
  return bytes;
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
