// The reproducer (see media.hpp): reading every log from where it stands, applying records in
// sequence order up to the first gap, the crash-atomic root flip, freeing log space, recovery.
#include <atomic>
#include <limits>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>

#include "media.hpp"

namespace gpm::detail::tx {

namespace {
std::atomic_ref<std::uint64_t> shared_word(std::uint64_t& w) {
  return std::atomic_ref<std::uint64_t>(w);
}
}  // namespace

reproducer::reproducer(heap_media media)
    : media_(std::move(media)), scan_(media_.layout().logs, 0), queued_(media_.layout().logs) {
  const root_record r = media_.root();
  applied_ = r.applied_seq;
  epoch_ = r.epoch;
  undo_ = r.undo != 0;
}

void reproducer::scan(std::uint32_t log) {
  while (auto u = media_.read_unit(log, scan_[log], epoch_)) {
    // A unit's records have consecutive seqs: its space is free once the last one is applied.
    queued_[log].emplace_back(scan_[log], u->records.back().seq);
    scan_[log] += u->chunks;
    for (record& r : u->records) {
      if (r.seq > applied_) ready_.emplace(r.seq, std::move(r));
    }
  }
}

std::uint64_t reproducer::roll_back() {
  std::uint64_t rolled = 0;
  const heap_layout& layout = media_.layout();
  // Undo records lie in fixed slots; a live one may start at any chunk. Live records touch
  // disjoint words (each was written while its transaction held the words' orecs), so the order
  // of rollback does not matter.
  for (std::uint32_t log = 0; log < layout.logs; ++log) {
    for (std::uint64_t pos = 0; pos < layout.log_chunks; ++pos) {
      if (const auto r = media_.read_record(log, pos, epoch_, true)) {
        media_.apply(*r);
        ++rolled;
      }
    }
  }
  if (rolled != 0) persist(media_.home(), layout.words * sizeof(std::uint32_t));
  return rolled;
}

std::uint64_t reproducer::apply_ready() {
  std::uint64_t lo = std::numeric_limits<std::uint64_t>::max(), hi = 0, applied = 0;
  for (auto it = ready_.begin(); it != ready_.end() && it->first == applied_ + 1;
       it = ready_.erase(it)) {
    media_.apply(it->second);
    for (const std::uint64_t p : it->second.pairs) {
      lo = std::min(lo, p & 0xffffffffu);
      hi = std::max(hi, p & 0xffffffffu);
    }
    ++applied_;
    ++applied;
  }
  if (applied != 0) persist(media_.home() + lo, (hi - lo + 1) * sizeof(std::uint32_t));
  return applied;
}

bool reproducer::pass() {
  for (std::uint32_t log = 0; log < scan_.size(); ++log) scan(log);
  if (apply_ready() == 0) return false;
  crash_point("tx.apply");
  media_.write_root(applied_, epoch_, undo_);
  crash_point("tx.flip");
  // Records up to applied_ are in the home image: their chunks may be overwritten. Within a log
  // records lie in sequence order, so the applied ones are a prefix of each queue.
  for (std::uint32_t log = 0; log < scan_.size(); ++log) {
    auto& q = queued_[log];
    while (!q.empty() && q.front().second <= applied_) q.pop_front();
    const std::uint64_t head = q.empty() ? scan_[log] : q.front().first;
    std::uint64_t& published = media_.control(log).head;
    if (head != shared_word(published).load(std::memory_order_relaxed)) {
      shared_word(published).store(head, std::memory_order_release);
      persist(&published, sizeof published);
    }
  }
  return true;
}

void reproducer::mark_applied(std::uint64_t seq) {
  if (seq == applied_) return;
  applied_ = seq;
  media_.write_root(applied_, epoch_, undo_);
}

reproducer::recovered reproducer::recover(bool undo_next) {
  recovered out;
  if (undo_) {
    out.rolled_back = roll_back();
  } else {
    for (std::uint32_t log = 0; log < scan_.size(); ++log) {
      scan_[log] = shared_word(media_.control(log).head).load();
      scan(log);
    }
    out.replayed = apply_ready();
    out.discarded = ready_.size();
  }
  crash_point("tx.recover.replayed");
  // A new epoch: every record written so far stops validating, so the logs start empty.
  undo_ = undo_next;
  media_.write_root(applied_, ++epoch_, undo_);
  crash_point("tx.recover.flipped");
  for (std::uint32_t log = 0; log < scan_.size(); ++log) {
    log_control& c = media_.control(log);
    shared_word(c.head).store(0);
    persist(&c, sizeof c);
    scan_[log] = 0;
    queued_[log].clear();
  }
  ready_.clear();
  return out;
}

}  // namespace gpm::detail::tx
