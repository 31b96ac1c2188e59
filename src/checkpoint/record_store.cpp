// The checkpoint's commit records (see record_store.hpp).
#include "record_store.hpp"

#include <algorithm>
#include <cstring>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpm::checkpoint_detail {

bool all_zero(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return std::all_of(b, b + n, [](unsigned char c) { return c == 0; });
}

std::uint64_t record_store::record_checksum(const char* rec) const {
  fmt::record_head h;
  std::memcpy(&h, rec, sizeof h);
  h.checksum = 0;
  const std::uint64_t c = checksum64(&h, sizeof h, h.seq);
  return checksum64(rec + sizeof h, std::uint64_t{max_chunks()} * sizeof(fmt::record_entry), c);
}

std::optional<std::pair<std::uint64_t, std::vector<fmt::record_entry>>> record_store::read_record(
    std::uint32_t r) const {
  const char* rec = record_at(r);
  fmt::record_head h;
  std::memcpy(&h, rec, sizeof h);
  if (h.magic != fmt::kRecordMagic || h.max_chunks != max_chunks() ||
      h.checksum != record_checksum(rec)) {
    return std::nullopt;
  }
  std::vector<fmt::record_entry> e(max_chunks());
  std::memcpy(e.data(), rec + sizeof h, e.size() * sizeof(fmt::record_entry));
  for (const fmt::record_entry& x : e) {
    if (x.slot > 1) return std::nullopt;
  }
  return std::make_pair(h.seq, std::move(e));
}

void record_store::load() {
  auto r0 = read_record(0), r1 = read_record(1);
  if (!r0 && !r1) {
    // Until a first commit succeeds only record 0 is written (a torn first commit leaves it
    // invalid and record 1 zero). Once record 1 was written, record 0 was valid, and every
    // flip rewrites one record while the other stays valid: both invalid is damage.
    if (!all_zero(record_at(1), header->record_bytes)) {
      throw_error(errc::corrupt, who +
                                     ": both commit records fail their checksums; the "
                                     "checkpoint cannot be trusted. Delete it (free the "
                                     "pool objects \"" +
                                     object_name + "*\") and start over.");
    }
    current.assign(max_chunks(), fmt::record_entry{});
    seq = 0;
    in_force = 1;  // the first commit writes record 0
    return;
  }
  const bool use0 = r0 && (!r1 || r0->first > r1->first);
  auto& mine = use0 ? r0 : r1;
  auto& other = use0 ? r1 : r0;
  in_force = use0 ? 0 : 1;
  seq = mine->first;
  current = std::move(mine->second);
  previous_valid = other.has_value();
  if (previous_valid) previous = std::move(other->second);
}

void record_store::commit(const std::vector<fmt::record_entry>& next, std::uint64_t next_seq) {
  const std::uint32_t target = 1 - in_force;
  char* rec = record_at(target);
  fmt::record_head h{};
  h.magic = fmt::kRecordMagic;
  h.seq = next_seq;
  h.max_chunks = max_chunks();
  std::memcpy(rec + sizeof h, next.data(), next.size() * sizeof(fmt::record_entry));
  crash_point("checkpoint.record.entries_written");
  std::memcpy(rec, &h, sizeof h);  // checksum still zero: invalid until the next store
  h.checksum = record_checksum(rec);
  std::memcpy(rec, &h, sizeof h);
  persist_at("checkpoint.record.write", rec, header->record_bytes);
  crash_point("checkpoint.committed");
  previous = std::move(current);
  previous_valid = true;
  current = next;
  seq = next_seq;
  in_force = target;
}

}  // namespace gpm::checkpoint_detail
