// The host tier of a mapping (see host_cache.hpp).
#include "host_cache.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/elapsed.hpp>
#include <gpm/platform/error.hpp>

namespace gpm::detail::ooc {

using gpm::ooc::mode;

host_cache::host_cache(const host_cache_config& config, std::vector<const backing_file*> files,
                       const backing_file* spill)
    : config_(config),
      files_(std::move(files)),
      spill_(spill),
      mask_words_(static_cast<std::uint32_t>(config.line_bytes / kMaskGranule / 32)),
      per_segment_(std::max<std::uint64_t>(1, config.segment_bytes / config.line_bytes)),
      segment_((config.lines + per_segment_ - 1) / per_segment_, nullptr),
      entries_(config.lines),
      cap_(config.lines),
      grow_first_(config.mode == mode::volatile_data),
      evicted_((config.mapping_bytes + config.line_bytes - 1) / config.line_bytes, false) {
  pinned_.reserve(segment_.size());
  if (config_.staged || files_.empty() ||
      (config_.mode != mode::read_write && config_.mode != mode::write)) {
    config_.write_behind = false;
  }
  if (config.pin_at_start) {
    std::unique_lock lock(m_);
    grow(lock);
  }
  if (spill_ != nullptr) {
    const std::uint64_t lines = (config.mapping_bytes + config.line_bytes - 1) / config.line_bytes;
    spilled_.assign(lines, false);
    if (config.staged) {
      slot_.assign(lines, 0);
      frozen_.assign(lines, 0);
    }
    // Sparse: a line staged in runs (mode::write) reads zeros between and after them.
    spill_->resize((config.staged ? 2 : 1) * lines * config.line_bytes);  // staged: two halves
  }
}

host_cache::~host_cache() { join_trimmer(); }

void host_cache::join_trimmer() {
  if (trimmer_.joinable()) trimmer_.join();
}

std::byte* host_cache::data(std::uint32_t e) const {
  return segment_[e / per_segment_] + (e % per_segment_) * config_.line_bytes;
}

std::uint64_t host_cache::allocated_entries() const {
  std::lock_guard lock(m_);
  return allocated_;
}

bool host_cache::grow(std::unique_lock<std::mutex>& lock) {
  const std::uint64_t first = allocated_;
  const std::uint64_t n = std::min(per_segment_, cap_ - first);
  growing_ = true;
  lock.unlock();
  std::unique_ptr<staging_buffer> memory;
  try {
    memory = std::make_unique<staging_buffer>(n * config_.line_bytes, true);
  } catch (const gpm::error&) {
    // host memory cannot be pinned now (memory stays null): the cache works at the size it has
  }
  const bool pinned = memory != nullptr;
  lock.lock();
  growing_ = false;
  if (pinned) {
    segment_[first / per_segment_] = memory->data();
    pinned_.push_back(std::move(memory));
    allocated_ = first + n;
    free_ += n;
    hand_ = first;  // the clock meets the new entries first
  } else {
    cap_ = allocated_;
  }
  cv_.notify_all();
  if (allocated_ == 0) {
    throw_error(errc::out_of_memory, "gpm::ooc: cannot pin " +
                                         std::to_string(n * config_.line_bytes) +
                                         " bytes of host memory for the host cache");
  }
  return pinned;
}

void host_cache::note_reread(std::uint64_t line) {
  if (line < evicted_.size() && evicted_[line]) grow_first_ = true;
}

std::uint64_t host_cache::valid_bytes(std::uint64_t line) const {
  const std::uint64_t start = line * config_.line_bytes;
  return config_.mapping_bytes - start < config_.line_bytes ? config_.mapping_bytes - start
                                                            : config_.line_bytes;
}

std::uint64_t host_cache::stored_bytes(const backing_file& file, std::uint64_t at,
                                       std::uint64_t bytes) {
  const std::uint64_t held = file.held();
  return held > at ? std::min(bytes, held - at) : 0;
}

bool host_cache::in_spill(std::uint64_t line) const { return !spilled_.empty() && spilled_[line]; }

std::uint64_t host_cache::spill_at(std::uint64_t line) const {
  // Staged: slot s of every line in the file's half s, so that a run of lines in one slot is
  // one range of the file.
  return (slot_.empty() ? line : slot_[line] * spilled_.size() + line) * config_.line_bytes;
}

void host_cache::restage(std::uint64_t line) {
  if (frozen_.empty() || frozen_[line] == 0) return;
  join_trimmer();  // the other slot may be being given back
  frozen_[line] = 0;
  slot_[line] ^= 1;
  spilled_[line] = false;
  spill_mask_.erase(line);
}

bool host_cache::zeros_only(std::uint64_t line) const {
  if (in_spill(line)) return false;
  if (files_.empty()) return true;
  const auto [file, at] = place(line);
  return stored_bytes(*file, at, valid_bytes(line)) == 0;
}

std::uint32_t host_cache::take_free() {
  for (;;) {
    const auto e = static_cast<std::uint32_t>(hand_++ % allocated_);
    if (entries_[e].line == kNoLine && entries_[e].pins == 0 && !in_io(entries_[e])) return e;
  }
}

host_cache::victims host_cache::sweep() {
  victims v;
  const std::uint64_t n = allocated_;
  for (std::uint64_t step = 0; step < n; ++step) {
    const auto e = static_cast<std::uint32_t>(hand_++ % n);
    entry& x = entries_[e];
    if (x.pins != 0 || in_io(x) || x.line == kNoLine) continue;
    if (x.referenced) {
      x.referenced = false;  // the second chance: the next sweep may take it
    } else if (x.dirty) {
      if (v.dirty == kNone) v.dirty = e;
    } else if (x.read_ahead) {
      if (v.unused == kNone) v.unused = e;
    } else {
      v.clean = e;
      return v;
    }
  }
  return v;
}

// The order while no line comes back: a free entry, a clean used line, a dirty line (written
// back), a new segment, a line read ahead and unused (misses only: evicting it wastes the read
// that brought it, and read-ahead never evicts it for a line needed later still). Once lines come
// back (grow_first_): a free entry, a new segment, then the same order.
std::uint32_t host_cache::room(std::unique_lock<std::mutex>& lock, bool for_read_ahead) {
  for (;;) {
    if (free_ > 0) return take_free();
    const bool can_grow = allocated_ < cap_ && !growing_;
    if (can_grow && grow_first_) {
      grow(lock);
      continue;
    }
    victims v = sweep();
    if (v.clean == kNone && v.dirty == kNone) v = sweep();  // now that referenced bits are clear
    if (v.clean != kNone) return v.clean;
    if (v.dirty != kNone) {
      clean(lock, v.dirty);  // throws when the line cannot be written: nothing changed
      continue;
    }
    if (can_grow) {
      grow(lock);
      continue;
    }
    if (v.unused != kNone && !for_read_ahead) return v.unused;
    if (for_read_ahead) return kNone;
    cv_.wait(lock);  // every entry is pinned or under I/O, or a segment is being pinned
  }
}

void host_cache::install(std::uint32_t e, std::uint64_t line, bool busy, bool by_read_ahead) {
  entry& x = entries_[e];
  if (x.line != kNoLine) {
    index_.erase(x.line);
    evicted_[x.line] = true;
    ++counters_.evictions;
  } else {
    --free_;
  }
  x.line = line;
  x.pins = 1;
  x.busy = busy;
  x.dirty = false;
  x.whole = false;
  x.referenced = true;
  x.read_ahead = by_read_ahead;
  x.behind = false;
  if (config_.mode == mode::write) x.mask.assign(mask_words_, 0);
  index_[line] = e;
}

void host_cache::forget(std::uint32_t e) {
  index_.erase(entries_[e].line);
  entries_[e].line = kNoLine;
  entries_[e].pins = 0;
  ++free_;
}

template <class Io, class Undo>
void host_cache::unlocked_io(std::unique_lock<std::mutex>& lock, std::span<const std::uint32_t> run,
                             bool entry::*flag, Io&& io, Undo&& undo) {
  for (const std::uint32_t e : run) entries_[e].*flag = true;
  lock.unlock();
  try {
    io();
  } catch (...) {
    lock.lock();
    for (const std::uint32_t e : run) entries_[e].*flag = false;
    undo();
    cv_.notify_all();
    throw;
  }
  lock.lock();
  for (const std::uint32_t e : run) entries_[e].*flag = false;
  cv_.notify_all();
}

bool host_cache::writes_runs() const {
  // Whole lines to the one mapped file: masked lines and spills go alone.
  return config_.mode == mode::read_write && !config_.staged && files_.size() == 1;
}

void host_cache::clean(std::unique_lock<std::mutex>& lock, std::uint32_t e, bool behind) {
  std::vector<std::uint32_t> run{e};
  if (writes_runs()) {
    const std::uint64_t most = std::max<std::uint64_t>(1, kWriteRunBytes / config_.line_bytes);
    for (std::uint64_t line = entries_[e].line + 1; run.size() < most; ++line) {
      const auto it = index_.find(line);
      if (it == index_.end()) break;
      const entry& y = entries_[it->second];
      if (!y.dirty || in_io(y) || y.pins != 0) break;
      run.push_back(it->second);
    }
  }
  for (const std::uint32_t r : run) restage(entries_[r].line);
  // Fetches may read the bytes being written (a miss on a line written behind need not wait for
  // the run's write); stores, eviction and other writes wait.
  unlocked_io(
      lock, run, &entry::writing, [&] { write_entries(run); }, [] {});
  for (const std::uint32_t r : run) {
    entries_[r].dirty = false;
    entries_[r].behind = behind;
    if (!spilled_.empty()) note_spilled(entries_[r]);
  }
  if (behind) counters_.write_behind_lines += run.size();
}

bool host_cache::write_behind() {
  if (!write_behind_wanted()) return false;
  std::unique_lock lock(m_);
  if (behind_rewritten_ >= kRewritesOff &&
      4 * behind_rewritten_ >= counters_.write_behind_lines.load()) {
    behind_off_ = true;
    return false;
  }
  // Until the next store, a scan that finds nothing to write would find nothing again.
  stores_unseen_ = 0;
  // The lowest dirty line nobody uses; where lines go in runs, the lowest that starts a run long
  // enough (the dirty idle lines in line order, split where they stop following each other).
  std::vector<std::pair<std::uint64_t, std::uint32_t>> idle;
  for (std::uint32_t e = 0; e < allocated_; ++e) {
    const entry& x = entries_[e];
    if (x.dirty && !in_io(x) && x.pins == 0) idle.emplace_back(x.line, e);
  }
  if (idle.empty()) return false;
  std::sort(idle.begin(), idle.end());
  std::uint32_t pick = idle.front().second;
  if (writes_runs()) {
    const std::uint64_t least = std::max<std::uint64_t>(
        1, std::min(kWriteBehindRunBytes / config_.line_bytes, config_.lines / 4));
    pick = kNone;
    for (std::size_t at = 0, from = 0; at < idle.size(); ++at) {
      if (at > from && idle[at].first != idle[at - 1].first + 1) from = at;
      if (at + 1 - from >= least) {
        pick = idle[from].second;
        break;
      }
    }
    if (pick == kNone) return false;
  }
  clean(lock, pick, true);  // unlocks while writing
  ++stores_unseen_;         // more runs may wait
  return true;
}

bool host_cache::writing(std::uint64_t line) const {
  std::lock_guard lock(m_);
  const auto it = index_.find(line);
  return it != index_.end() && entries_[it->second].writing;
}

void host_cache::write_entries(std::span<const std::uint32_t> run) {
  if (run.size() == 1) return write_entry(entries_[run.front()], data(run.front()));
  std::vector<const std::byte*> src;
  std::uint64_t bytes = 0;
  for (const std::uint32_t r : run) {
    src.push_back(data(r));
    bytes += valid_bytes(entries_[r].line);
  }
  files_.front()->write_gathered(place(entries_[run.front()].line).second, src.data(), src.size(),
                                 config_.line_bytes, bytes);
  counters_.file_bytes_written += bytes;
  ++counters_.file_writes;
}

// Under the lock, never in write_entry: I/O threads clean entries at the same time, and
// concurrent inserts into spill_mask_ lost a line's mask now and then (log_epoch then took the
// whole staged line for written, and bytes no kernel wrote in the epoch reached the file).
void host_cache::note_spilled(const entry& x) {
  spilled_[x.line] = true;
  if (config_.mode != mode::write) return;
  std::vector<std::uint32_t>& m = spill_mask_[x.line];
  m.resize(mask_words_, 0);
  for (std::uint32_t w = 0; w < mask_words_; ++w) m[w] |= x.whole ? ~0u : x.mask[w];
}

std::uint32_t host_cache::pin(std::uint64_t line, purpose why) {
  std::unique_lock lock(m_);
  for (;;) {
    if (const auto it = index_.find(line); it != index_.end()) {
      entry& x = entries_[it->second];
      if (x.busy || (x.writing && why == purpose::store)) {
        cv_.wait(lock);
        continue;
      }
      ++x.pins;
      x.referenced = true;
      if (why == purpose::fetch) {
        ++counters_.hits;
        if (x.read_ahead) ++counters_.read_ahead_hits;
      } else {
        x.busy = true;  // until store(): nobody reads bytes that are being replaced
      }
      x.read_ahead = false;
      return it->second;
    }
    if (why == purpose::fetch && zeros_only(line)) {
      ++counters_.misses;
      return kZeros;
    }
    const std::uint32_t e = room(lock, false);
    if (index_.count(line) != 0) continue;  // brought in while room() had the lock released
    const bool fill = why == purpose::fetch;
    const bool from_spill = in_spill(line);
    if (fill) note_reread(line);
    install(e, line, !fill, false);  // a store's entry is busy until store()
    if (fill) {
      ++counters_.misses;
      unlocked_io(
          lock, {&e, 1}, &entry::busy, [&] { read_line(line, from_spill, data(e)); },
          [&] { forget(e); });
    }
    return e;
  }
}

void host_cache::unpin(std::uint32_t e, bool discard) {
  std::lock_guard lock(m_);
  entry& x = entries_[e];
  --x.pins;
  if (x.dirty && x.pins == 0) ++stores_unseen_;  // write_behind may take it now
  if (discard) {
    x.busy = false;  // the store that made it busy failed
    if (x.pins == 0 && !x.dirty) forget(e);
  }
  cv_.notify_all();
}

void host_cache::store(std::uint32_t e, const std::byte* src, const std::uint32_t* mask) {
  entry& x = entries_[e];  // pinned by the caller: no other thread touches its bytes
  if (src != nullptr && mask == nullptr) {
    std::memcpy(data(e), src, config_.line_bytes);
  } else if (src != nullptr) {
    for_each_run(mask, mask_words_, [&](std::uint32_t b, std::uint32_t end) {
      std::memcpy(data(e) + b * kMaskGranule, src + b * kMaskGranule, (end - b) * kMaskGranule);
    });
  }
  std::lock_guard lock(m_);
  if (x.behind) {
    x.behind = false;
    ++behind_rewritten_;
  }
  if (mask == nullptr) {
    x.whole = true;
  } else {
    for (std::uint32_t w = 0; w < mask_words_; ++w) x.mask[w] |= mask[w];
  }
  x.dirty = true;
  x.busy = false;
  ++stores_unseen_;
  cv_.notify_all();
}

void host_cache::read_ahead(std::uint64_t first, std::uint64_t n) {
  std::unique_lock lock(m_);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> run;
  const bool one_file = files_.size() == 1;
  try {
    for (std::uint64_t line = first; line < first + n; ++line) {
      if (line * config_.line_bytes >= config_.mapping_bytes) break;
      if (index_.count(line) != 0 || zeros_only(line)) {  // present, or zeros: the run ends here
        read_run(lock, run);
        continue;
      }
      // Only lines of the one file that follow each other share a read. The run so far is read
      // before room() picks this line's entry: read_run unlocks, and an entry picked but not
      // installed could meanwhile be picked and installed by another thread for another line.
      const bool alone = !one_file || in_spill(line);
      if (alone || (!run.empty() && run.back().first + 1 != line)) read_run(lock, run);
      const std::uint32_t e = room(lock, true);  // may unlock: check for the line again
      if (e == kNone) break;
      // Brought in meanwhile, or even spilled since: e is left unused (read-ahead is a hint).
      if (index_.count(line) != 0 || (!alone && in_spill(line))) {
        read_run(lock, run);
        continue;
      }
      note_reread(line);
      install(e, line, true, true);  // busy until read_run: nobody uses its bytes
      run.emplace_back(line, e);
      if (alone) read_run(lock, run);
    }
    read_run(lock, run);
  } catch (...) {
    for (const auto& [line, e] : run) {  // installed, not read: nothing holds them yet
      entries_[e].busy = false;
      forget(e);
    }
    cv_.notify_all();
    throw;
  }
}

void host_cache::read_run(std::unique_lock<std::mutex>& lock,
                          std::vector<std::pair<std::uint64_t, std::uint32_t>>& run) {
  if (run.empty()) return;
  const std::uint64_t lb = config_.line_bytes;
  std::vector<std::byte*> dst;
  std::uint64_t valid = 0;
  for (const auto& [line, e] : run) {
    dst.push_back(data(e));
    valid += valid_bytes(line);
  }
  const std::uint64_t first = run.front().first;
  const bool from_spill = in_spill(first);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> mine;
  mine.swap(run);
  lock.unlock();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (mine.size() == 1) {
      read_line(first, from_spill, dst[0]);
    } else {
      const std::uint64_t at = place(first).second;
      const std::uint64_t stored = stored_bytes(*files_.front(), at, valid);
      const std::uint64_t lines = (stored + lb - 1) / lb;  // the buffers it reaches into
      if (stored > 0) files_.front()->read_scattered(at, dst.data(), lines, lb, stored);
      counters_.file_bytes_read += stored;
      for (std::uint64_t k = stored / lb; k < dst.size(); ++k) {
        const std::uint64_t from = k == stored / lb ? stored % lb : 0;
        std::memset(dst[k] + from, 0, lb - from);
      }
    }
  } catch (...) {
    lock.lock();
    run.swap(mine);  // the caller forgets them
    throw;
  }
  counters_.read_ahead_read_ns += nanoseconds_since(start);
  lock.lock();
  ++counters_.read_ahead_reads;
  for (const auto& [line, e] : mine) {
    entries_[e].busy = false;
    entries_[e].pins = 0;
    ++counters_.read_ahead_lines;
  }
  cv_.notify_all();
}

void host_cache::write_back(std::uint64_t first, std::uint64_t last) {
  std::unique_lock lock(m_);
  std::string failure;
  for (std::uint32_t e = 0; e < entries_.size(); ++e) {
    entry& x = entries_[e];
    if (!x.dirty || x.line < first || x.line > last) continue;
    cv_.wait(lock, [&] { return !in_io(x) && x.pins == 0; });
    // Meanwhile another thread may have written it back, or reused it for another line.
    if (!x.dirty || x.line < first || x.line > last) continue;
    try {
      clean(lock, e);
    } catch (const gpm::error& err) {
      if (failure.empty()) failure = err.what();
    }
  }
  if (!failure.empty()) throw_error(errc::io, failure);
}

// Line l lies in file l % n at line l / n of its range (striping; n = 1: the one file).
std::pair<const backing_file*, std::uint64_t> host_cache::place(std::uint64_t line) const {
  const std::uint64_t n = files_.size();
  return {files_[line % n], line / n * config_.line_bytes};
}

void host_cache::read_line(std::uint64_t line, bool from_spill, std::byte* dst) {
  const std::uint64_t valid = valid_bytes(line);
  if (from_spill) {
    spill_->read(spill_at(line), dst, valid, config_.line_bytes);
    counters_.spill_bytes_read += valid;
    std::memset(dst + valid, 0, config_.line_bytes - valid);
  } else if (!files_.empty()) {
    const auto [file, at] = place(line);
    const std::uint64_t stored = stored_bytes(*file, at, valid);
    if (stored > 0) file->read(at, dst, stored, config_.line_bytes);
    counters_.file_bytes_read += stored;
    std::memset(dst + stored, 0, config_.line_bytes - stored);
  } else {
    std::memset(dst, 0, config_.line_bytes);
  }
}

void host_cache::read_lines(std::uint64_t first, std::uint64_t n, std::byte* dst) {
  const std::uint64_t lb = config_.line_bytes;
  if (files_.size() != 1) {  // striped (each line in another file) or scratch data
    for (std::uint64_t k = 0; k < n; ++k) read_line(first + k, false, dst + k * lb);
    return;
  }
  // Past what the file held before create extended it there are only zeros: not read.
  const std::uint64_t start = first * lb;
  const std::uint64_t valid =
      stored_bytes(*files_.front(), start, std::min(n * lb, config_.mapping_bytes - start));
  if (valid > 0) files_.front()->read(start, dst, valid, n * lb);
  counters_.file_bytes_read += valid;
  std::memset(dst + valid, 0, n * lb - valid);
}

std::uint64_t host_cache::disk() const {
  if (!files_.empty()) return files_.front()->disk();
  return spill_ != nullptr ? spill_->disk() : 0;
}

bool host_cache::may_fill_zeros() const {
  return held_lines() < (config_.mapping_bytes + config_.line_bytes - 1) / config_.line_bytes;
}

std::uint64_t host_cache::held_lines() const {
  const std::uint64_t n = files_.size();
  const std::uint64_t lb = config_.line_bytes;
  std::uint64_t lines = 0;
  for (std::uint64_t k = 0; k < n; ++k) {
    // File k holds line l at line l / n of its range (place): its lines [0, h) hold data.
    const std::uint64_t h = (files_[k]->held() + lb - 1) / lb;
    if (h > 0) lines = std::max(lines, (h - 1) * n + k + 1);
  }
  return lines;
}

void host_cache::write_lines(std::uint64_t first, std::uint64_t n, const std::byte* src) {
  const std::uint64_t lb = config_.line_bytes;
  if (files_.size() != 1) {  // striped: each line in another file
    for (std::uint64_t k = 0; k < n; ++k) {
      const auto [file, at] = place(first + k);
      const std::uint64_t valid = valid_bytes(first + k);
      file->write(at, src + k * lb, valid);
      counters_.file_bytes_written += valid;
      ++counters_.file_writes;
    }
    return;
  }
  const std::uint64_t start = first * lb;
  const std::uint64_t bytes = std::min(n * lb, config_.mapping_bytes - start);
  files_.front()->write(start, src, bytes);
  counters_.file_bytes_written += bytes;
  ++counters_.file_writes;
}

void host_cache::write_entry(const entry& x, const std::byte* src) {
  const std::uint64_t valid = valid_bytes(x.line);
  const std::uint32_t* mask = config_.mode == mode::write && !x.whole ? x.mask.data() : nullptr;
  if (config_.mode == mode::volatile_data || config_.staged) {
    // The spill file holds line l at spill_at(l); a masked line's runs land over the runs an
    // earlier spill of it left there, and the line's spill mask (note_spilled) gathers them all.
    const std::uint64_t at = spill_at(x.line);
    counters_.spill_bytes_written += spill_->write_masked(at, src, valid, mask, mask_words_);
    // A staged copy goes to the disk now, while kernels run: the epoch that names it fdatasyncs
    // the staging file, and finds less to wait for.
    if (config_.staged) spill_->start_writeback(at, valid);
    crash_point("ooc.spill");
    return;
  }
  const auto [file, at] = place(x.line);
  counters_.file_bytes_written += file->write_masked(at, src, valid, mask, mask_words_);
  ++counters_.file_writes;
}

void host_cache::log_epoch(std::uint64_t first, std::uint64_t last, epoch_sink emit, void* ctx) {
  std::unique_lock lock(m_);
  last = std::min<std::uint64_t>(last, spilled_.size() - 1);
  // The dirty entries of the range, pinned until the epoch ends: neither read-ahead nor a miss
  // may take one and stage it over a copy the epoch's records name.
  std::vector<std::pair<std::uint64_t, std::uint32_t>>& dirty = epoch_pins_;
  dirty.clear();
  for (std::uint32_t e = 0; e < entries_.size(); ++e) {
    entry& x = entries_[e];
    if (!x.dirty || x.line < first || x.line > last) continue;
    cv_.wait(lock, [&] { return !in_io(x); });
    if (!x.dirty || x.line < first || x.line > last) continue;
    ++x.pins;
    dirty.emplace_back(x.line, e);
  }
  std::sort(dirty.begin(), dirty.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> staged;  // line, where its copy is
  for (std::uint64_t l = first; l <= last; ++l) {
    if (spilled_[l]) staged.emplace_back(l, spill_at(l));
  }
  lock.unlock();
  std::vector<std::uint64_t> named;  // the staged copies emitted
  try {
    std::vector<std::byte> buf(config_.line_bytes);
    auto next = dirty.begin();
    for (const auto& [l, at] : staged) {
      for (; next != dirty.end() && next->first < l; ++next) emit_entry(*next, emit, ctx);
      const std::uint64_t valid = valid_bytes(l);
      const entry* resident =
          next != dirty.end() && next->first == l ? &entries_[next->second] : nullptr;
      // A resident line written whole supersedes its staged copy.
      const bool superseded =
          resident != nullptr && (config_.mode != mode::write || resident->whole);
      if (!superseded) {
        spill_->read(at, buf.data(), valid, config_.line_bytes);
        counters_.spill_bytes_read += valid;
        const auto it = spill_mask_.find(l);
        emit(ctx, l, buf.data(), valid, it == spill_mask_.end() ? nullptr : it->second.data(),
             mask_words_, at);
        named.push_back(l);
      }
    }
    for (; next != dirty.end(); ++next) emit_entry(*next, emit, ctx);
  } catch (...) {
    release_epoch(false);
    throw;
  }
  lock.lock();
  for (const std::uint64_t l : named) frozen_[l] = 1;
}

void host_cache::end_epoch(bool unfreeze) {
  for (const auto& d : epoch_pins_) --entries_[d.second].pins;
  epoch_pins_.clear();
  if (unfreeze) std::fill(frozen_.begin(), frozen_.end(), 0);
  cv_.notify_all();
}

void host_cache::release_epoch(bool committed) {
  std::lock_guard lock(m_);
  end_epoch(!committed);
}

void host_cache::emit_entry(const std::pair<std::uint64_t, std::uint32_t>& d, epoch_sink emit,
                            void* ctx) const {
  const entry& x = entries_[d.second];
  const bool masked = config_.mode == mode::write && !x.whole;
  emit(ctx, d.first, data(d.second), valid_bytes(d.first), masked ? x.mask.data() : nullptr,
       mask_words_, kNotStaged);
}

void host_cache::finish_epoch(std::uint64_t first, std::uint64_t last) {
  std::lock_guard lock(m_);
  for (entry& x : entries_) {
    if (!x.dirty || x.line < first || x.line > last) continue;
    x.dirty = false;
    x.whole = false;
    std::fill(x.mask.begin(), x.mask.end(), 0u);
  }
  end_epoch(true);
  if (slot_.empty()) return;  // nothing is staged without a staging file
  last = std::min<std::uint64_t>(last, spilled_.size() - 1);
  // The staged copies are in the file now: their blocks of the staging file are given back, so
  // that it holds what was staged since the last epoch, not every line ever staged, and the lines
  // stage into their other slots from now on. Not a line whose entry is under I/O: an I/O thread
  // may be reading its staged copy, having chosen the staging file before this epoch, or writing
  // it there.
  join_trimmer();  // the slots the last epoch gave back are free again
  const auto under_io = [&](std::uint64_t l) {
    const auto it = index_.find(l);
    return it != index_.end() && in_io(entries_[it->second]);
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;  // (byte, bytes) to punch
  for (std::uint64_t l = first; l <= last; ++l) {
    if (!spilled_[l]) continue;
    spilled_[l] = false;
    spill_mask_.erase(l);
    if (under_io(l)) continue;
    const std::uint64_t at = spill_at(l);
    if (!runs.empty() && runs.back().first + runs.back().second == at) {
      runs.back().second += config_.line_bytes;
    } else {
      runs.emplace_back(at, config_.line_bytes);
    }
    slot_[l] ^= 1;
  }
  if (runs.empty()) return;
  const backing_file* spill = spill_;
  trimmer_ = std::thread([spill, runs = std::move(runs)] {
    for (const auto& [at, bytes] : runs) spill->punch(at, bytes);
  });
}

}  // namespace gpm::detail::ooc
