// The host tier of a mapping (see host_cache.hpp).
#include "host_cache.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <gpm/platform/error.hpp>

namespace gpm::detail::ooc {

using gpm::ooc::mode;

namespace {

// mode::write lines with more runs of written bytes than this go back by read-merge-write.
constexpr std::size_t kMaxRunWrites = 8;

// Calls f(first_bit, end_bit) for each run of set bits in `mask` (words of 32 bits).
template <class F>
void for_each_run(const std::uint32_t* mask, std::uint32_t words, F&& f) {
  const std::uint32_t bits = words * 32;
  std::uint32_t b = 0;
  while (b < bits) {
    if ((mask[b / 32] >> (b % 32) & 1u) == 0) {
      ++b;
      continue;
    }
    const std::uint32_t start = b;
    while (b < bits && (mask[b / 32] >> (b % 32) & 1u) != 0) ++b;
    f(start, b);
  }
}

}  // namespace

host_cache::host_cache(const host_cache_config& config, std::vector<const backing_file*> files,
                       const backing_file* spill)
    : config_(config),
      files_(std::move(files)),
      spill_(spill),
      memory_(config.lines * config.line_bytes),
      mask_words_(static_cast<std::uint32_t>(config.line_bytes / kMaskGranule / 32)),
      entries_(config.lines) {
  if (config.mode == mode::volatile_data) {
    spilled_.assign((config.mapping_bytes + config.line_bytes - 1) / config.line_bytes, false);
  }
}

std::byte* host_cache::data(std::uint32_t e) const {
  return memory_.data() + static_cast<std::uint64_t>(e) * config_.line_bytes;
}

std::uint64_t host_cache::valid_bytes(std::uint64_t line) const {
  const std::uint64_t start = line * config_.line_bytes;
  return config_.mapping_bytes - start < config_.line_bytes ? config_.mapping_bytes - start
                                                            : config_.line_bytes;
}

bool host_cache::in_spill(std::uint64_t line) const {
  return config_.mode == mode::volatile_data && spilled_[line];
}

std::uint32_t host_cache::find_victim(bool clean_only) {
  const std::uint64_t n = entries_.size();
  std::uint32_t dirty = kNone;
  for (std::uint64_t step = 0; step < 2 * n; ++step) {
    const auto e = static_cast<std::uint32_t>(hand_++ % n);
    entry& x = entries_[e];
    if (x.pins != 0 || x.busy) continue;
    if (x.line == kNoLine) return e;
    if (x.referenced) {
      x.referenced = false;
      continue;
    }
    if (!x.dirty) return e;
    if (dirty == kNone) dirty = e;
  }
  return clean_only ? kNone : dirty;
}

void host_cache::install(std::uint32_t e, std::uint64_t line, bool busy, bool by_read_ahead) {
  entry& x = entries_[e];
  if (x.line != kNoLine) {
    index_.erase(x.line);
    ++counters_.evictions;
  }
  x.line = line;
  x.pins = 1;
  x.busy = busy;
  x.dirty = false;
  x.whole = false;
  x.referenced = true;
  x.read_ahead = by_read_ahead;
  if (config_.mode == mode::write) x.mask.assign(mask_words_, 0);
  index_[line] = e;
}

void host_cache::forget(std::uint32_t e) {
  index_.erase(entries_[e].line);
  entries_[e].line = kNoLine;
  entries_[e].pins = 0;
}

template <class Io, class Undo>
void host_cache::unlocked_io(std::unique_lock<std::mutex>& lock, std::uint32_t e, Io&& io,
                             Undo&& undo) {
  entries_[e].busy = true;
  lock.unlock();
  try {
    io();
  } catch (...) {
    lock.lock();
    entries_[e].busy = false;
    undo();
    cv_.notify_all();
    throw;
  }
  lock.lock();
  entries_[e].busy = false;
  cv_.notify_all();
}

void host_cache::clean(std::unique_lock<std::mutex>& lock, std::uint32_t e) {
  entry& x = entries_[e];
  unlocked_io(
      lock, e, [&] { write_entry(x, data(e)); }, [] {});
  x.dirty = false;
  if (config_.mode == mode::volatile_data) spilled_[x.line] = true;
}

std::uint32_t host_cache::pin(std::uint64_t line, purpose why) {
  std::unique_lock lock(m_);
  for (;;) {
    if (const auto it = index_.find(line); it != index_.end()) {
      entry& x = entries_[it->second];
      if (x.busy) {
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
    const std::uint32_t e = find_victim(false);
    if (e == kNone) {
      cv_.wait(lock);  // every entry is pinned or busy: one is soon released
      continue;
    }
    if (entries_[e].dirty) {
      clean(lock, e);  // throws when the line cannot be written: nothing changed
      continue;
    }
    const bool fill = why == purpose::fetch;
    const bool from_spill = in_spill(line);
    install(e, line, !fill, false);  // a store's entry is busy until store()
    if (fill) {
      ++counters_.misses;
      unlocked_io(
          lock, e, [&] { read_line(line, from_spill, data(e)); }, [&] { forget(e); });
    }
    return e;
  }
}

void host_cache::unpin(std::uint32_t e, bool discard) {
  std::lock_guard lock(m_);
  entry& x = entries_[e];
  --x.pins;
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
  if (mask == nullptr) {
    x.whole = true;
  } else {
    for (std::uint32_t w = 0; w < mask_words_; ++w) x.mask[w] |= mask[w];
  }
  x.dirty = true;
  x.busy = false;
  cv_.notify_all();
}

void host_cache::read_ahead(std::uint64_t line) {
  std::unique_lock lock(m_);
  if (line * config_.line_bytes >= config_.mapping_bytes || index_.count(line) != 0) return;
  const std::uint32_t e = find_victim(true);
  if (e == kNone) return;
  const bool from_spill = in_spill(line);
  install(e, line, false, true);
  unlocked_io(
      lock, e, [&] { read_line(line, from_spill, data(e)); }, [&] { forget(e); });
  entries_[e].pins = 0;
  ++counters_.read_ahead_lines;
}

void host_cache::write_back(std::uint64_t first, std::uint64_t last) {
  std::unique_lock lock(m_);
  std::string failure;
  for (std::uint32_t e = 0; e < entries_.size(); ++e) {
    entry& x = entries_[e];
    if (!x.dirty || x.line < first || x.line > last) continue;
    cv_.wait(lock, [&] { return !x.busy && x.pins == 0; });
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
    spill_->read(line * config_.line_bytes, dst, valid, config_.line_bytes);
  } else if (!files_.empty()) {
    const auto [file, at] = place(line);
    file->read(at, dst, valid, config_.line_bytes);
    counters_.file_bytes_read += valid;
  } else {
    std::memset(dst, 0, valid);
  }
  std::memset(dst + valid, 0, config_.line_bytes - valid);
}

void host_cache::write_entry(const entry& x, const std::byte* src) {
  const std::uint64_t valid = valid_bytes(x.line);
  if (config_.mode == mode::volatile_data) {
    spill_->write(x.line * config_.line_bytes, src, valid);
    counters_.spill_bytes_written += valid;
    return;
  }
  const auto [file, at] = place(x.line);
  if (config_.mode != mode::write || x.whole) {
    file->write(at, src, valid);
    counters_.file_bytes_written += valid;
    return;
  }
  // Only the bytes written go back: the runs of the mask, within the line's valid bytes.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;
  for_each_run(x.mask.data(), mask_words_, [&](std::uint32_t b, std::uint32_t end) {
    const std::uint64_t from = std::uint64_t{b} * kMaskGranule;
    const std::uint64_t to = std::min<std::uint64_t>(std::uint64_t{end} * kMaskGranule, valid);
    if (from < to) runs.emplace_back(from, to);
  });
  if (runs.size() <= kMaxRunWrites) {
    for (const auto& [from, to] : runs) file->write(at + from, src + from, to - from);
  } else if (!runs.empty()) {
    // A system call per run would cost thousands for a line written sparsely (every few
    // elements): read the span the runs cover, put the written bytes in, write it back once.
    // The bytes between the runs go back as they were read.
    const std::uint64_t from = runs.front().first;
    const std::uint64_t bytes = runs.back().second - from;
    std::vector<std::byte> span(bytes);
    file->read(at + from, span.data(), bytes, bytes);
    for (const auto& [b, e] : runs) std::memcpy(span.data() + (b - from), src + b, e - b);
    file->write(at + from, span.data(), bytes);
  }
  for (const auto& [from, to] : runs) counters_.file_bytes_written += to - from;
}

}  // namespace gpm::detail::ooc
