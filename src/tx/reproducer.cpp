// The reproducer (see media.hpp): merging the logs' streams in sequence order up to the first
// gap, applying their records to the home image, the crash-atomic root flip, freeing log space,
// recovery.
#include <algorithm>
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

void log_queue::push(entry e) {
  std::size_t i = heap_.size();
  heap_.push_back(e);
  for (; i > 0 && e.seq < heap_[(i - 1) / 2].seq; i = (i - 1) / 2) heap_[i] = heap_[(i - 1) / 2];
  heap_[i] = e;
}

void log_queue::pop() {
  const entry last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0, last);
}

void log_queue::replace_top(entry e) { sift_down(0, e); }

const log_queue::entry* log_queue::second() const {
  if (heap_.size() < 2) return nullptr;
  return heap_.size() > 2 && heap_[2].seq < heap_[1].seq ? &heap_[2] : &heap_[1];
}

void log_queue::sift_down(std::size_t i, entry e) {
  const std::size_t n = heap_.size();
  for (std::size_t child = 2 * i + 1; child < n; i = child, child = 2 * i + 1) {
    if (child + 1 < n && heap_[child + 1].seq < heap_[child].seq) ++child;
    if (e.seq <= heap_[child].seq) break;
    heap_[i] = heap_[child];
  }
  heap_[i] = e;
}

reproducer::reproducer(heap_media media)
    : media_(std::move(media)),
      cursors_(media_.layout().logs),
      published_(media_.layout().logs, 0) {
  const root_record r = media_.root();
  applied_ = r.applied_seq;
  epoch_ = r.epoch;
  undo_ = r.undo != 0;
}

void reproducer::restart(const std::vector<std::uint64_t>* heads) {
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    cursors_[log] = cursor{heads != nullptr ? (*heads)[log] : 0, std::nullopt};
  }
  queue_.clear();
}

std::uint64_t reproducer::roll_back() {
  std::uint64_t rolled = 0;
  const heap_layout& layout = media_.layout();
  touched_words touched;
  // Undo records lie in fixed slots; a live one may start at any chunk. Live records touch
  // disjoint words (each was written while its transaction held the words' orecs), so the order
  // of rollback does not matter.
  for (std::uint32_t log = 0; log < layout.logs; ++log) {
    for (std::uint64_t pos = 0; pos < layout.log_chunks; ++pos) {
      if (const auto r = media_.read_record(log, pos, epoch_, applied_, true)) {
        media_.apply(*r, touched);
        ++rolled;
      }
    }
  }
  media_.persist_home(touched, "tx.recover.undo");
  return rolled;
}

bool reproducer::load_next(std::uint32_t log) {
  cursor& c = cursors_[log];
  c.next = media_.read_unit(log, c.pos, epoch_, applied_);
  while (c.next && c.next->last() <= applied_) {
    c.pos += c.next->chunks;
    c.next = media_.read_unit(log, c.pos, epoch_, applied_);
  }
  return c.next.has_value();
}

std::uint64_t reproducer::apply_ready(std::uint64_t limit, touched_words& touched,
                                      const std::atomic<std::uint32_t>* yield) {
  const auto go_on = [&] {
    return yield == nullptr || yield->load(std::memory_order_relaxed) == 0;
  };
  // Logs whose next unit was not there at the last look may have it now.
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    cursor& c = cursors_[log];
    if (!c.next && load_next(log)) queue_.push({c.next->seq, log});
  }
  std::uint64_t applied = 0;
  bool shared = false;  // two logs' units stand for the next number
  // The lowest next unit continues the prefix, or nothing does: then seq applied_ + 1 is in no
  // log's next unit, so in none of their units (each log's seqs rise), and that is the gap. Units
  // wholly at or below applied_ (at recovery after a crash that came before their space was
  // freed) never stand in the queue (load_next passes them over); a unit partly below is
  // applied from applied_ + 1.
  while (!shared && !queue_.empty() && queue_.top().seq <= applied_ + 1 && applied < limit &&
         go_on()) {
    const std::uint32_t log = queue_.top().log;
    cursor& c = cursors_[log];
    // A number is one commit's: where units of two logs stand for one (crafted or damaged logs
    // only, each checksum valid), the prefix ends before it (the replay kernels leave a window
    // that holds one to this merge). The other logs' next units start at or above the top's (the
    // queue's order) and each ends above applied_, so the lowest of them is the one that can
    // share a number with the units applied from here.
    const log_queue::entry* second = queue_.second();
    const log_unit* other = second != nullptr ? &*cursors_[second->log].next : nullptr;
    // A warp's commits lie in its log one after another: follow the log while it continues.
    do {
      const std::uint64_t first = std::max(c.next->seq, applied_ + 1);
      std::uint64_t through = c.next->last();
      if (first <= through && other != nullptr && other->seq <= through &&
          other->last() >= first) {
        through = std::max(other->seq, first) - 1;
        shared = true;
      }
      applied += media_.apply(*c.next, applied_, through, touched);
      applied_ = std::max(applied_, through);
      if (shared) break;  // the unit stays at the cursor, applied in part
      c.pos += c.next->chunks;
      if (load_next(log)) media_.prefetch(log, c.pos + c.next->chunks);
    } while (c.next && c.next->seq <= applied_ + 1 && applied < limit && go_on());
    if (c.next) {
      queue_.replace_top({c.next->seq, log});
    } else {
      queue_.pop();
    }
  }
  return applied;
}

std::uint64_t reproducer::unreachable() const {
  std::uint64_t records = 0;
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    std::uint64_t pos = cursors_[log].pos;
    while (const auto u = media_.read_unit(log, pos, epoch_, applied_)) {
      // Members at or below applied_ (of a unit applied in part, where a number two logs share
      // ended the prefix) are not counted.
      if (u->last() > applied_) records += std::min<std::uint64_t>(u->width, u->last() - applied_);
      pos += u->chunks;
    }
  }
  return records;
}

void reproducer::free_log_space() {
  // Every unit before a log's cursor is applied: its chunks may be overwritten. The heads that
  // moved are persisted with one call over their control lines.
  log_control* first = nullptr;
  log_control* last = nullptr;
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    if (cursors_[log].pos == published_[log]) continue;
    published_[log] = cursors_[log].pos;
    log_control& c = media_.control(log);
    shared_word(c.head).store(published_[log], std::memory_order_release);
    if (first == nullptr) first = &c;
    last = &c;
  }
  if (first != nullptr) {
    persist_at("tx.apply.head", first, static_cast<std::size_t>(last + 1 - first) * sizeof *first);
  }
}

void reproducer::finish_pass() {
  crash_point("tx.apply");
  media_.write_root(applied_, epoch_, undo_, "tx.apply.root");
  crash_point("tx.flip");
  free_log_space();
}

std::uint64_t reproducer::pass(const std::atomic<std::uint32_t>* yield) {
  touched_words touched;
  const std::uint64_t applied = apply_ready(kBatch, touched, yield);
  if (applied == 0) return 0;
  media_.persist_home(touched, "tx.apply.home");
  finish_pass();
  return applied;
}

void reproducer::advance(std::uint64_t seq, const std::vector<std::uint64_t>& positions) {
  applied_ = seq;
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    cursors_[log] = cursor{positions[log], std::nullopt};
  }
  queue_.clear();
  finish_pass();
}

void reproducer::start_at_heads() {
  std::vector<std::uint64_t> heads(cursors_.size());
  for (std::uint32_t log = 0; log < heads.size(); ++log) {
    heads[log] = shared_word(media_.control(log).head).load();
  }
  restart(&heads);
}

std::vector<std::uint64_t> reproducer::positions() const {
  std::vector<std::uint64_t> out(cursors_.size());
  for (std::uint32_t log = 0; log < out.size(); ++log) out[log] = cursors_[log].pos;
  return out;
}

bool reproducer::any_ready() const {
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    if (cursors_[log].next || media_.read_unit(log, cursors_[log].pos, epoch_, applied_)) {
      return true;
    }
  }
  return false;
}

void reproducer::mark_applied(std::uint64_t seq) {
  if (seq == applied_) return;
  applied_ = seq;
  media_.write_root(applied_, epoch_, undo_, "tx.sync.root");
}

reproducer::recovered reproducer::recover(bool undo_next) {
  recovered out;
  if (undo_) {
    out.rolled_back = roll_back();
  } else {
    start_at_heads();
    touched_words touched;
    out.replayed = apply_ready(std::numeric_limits<std::uint64_t>::max(), touched);
    media_.persist_home(touched, "tx.recover.home");
    out.discarded = unreachable();
  }
  crash_point("tx.recover.replayed");
  // A new epoch: every record written so far stops validating, so the logs start empty.
  undo_ = undo_next;
  media_.write_root(applied_, ++epoch_, undo_, "tx.recover.root");
  crash_point("tx.recover.flipped");
  for (std::uint32_t log = 0; log < cursors_.size(); ++log) {
    log_control& c = media_.control(log);
    shared_word(c.head).store(0);
    persist_at("tx.recover.head", &c, sizeof c);
  }
  restart(nullptr);
  std::fill(published_.begin(), published_.end(), 0);
  return out;
}

}  // namespace gpm::detail::tx
