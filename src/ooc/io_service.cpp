// The host I/O threads of a mapping (see io_service.hpp).
#include "io_service.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include <gpm/platform/elapsed.hpp>
#include <gpm/platform/error.hpp>

#include "disk_gate.hpp"
#include "staging.hpp"

namespace gpm::detail::ooc {

namespace {

constexpr std::size_t kRecentMisses = 64;
// An idle thread polls (yielding the core between polls) for io_config::idle_poll after its last
// work, then sleeps between polls, from 8 us doubling up to kMaxSleep: a kernel's first miss after
// an idle spell waits at most that long to be noticed, and an idle mapping costs no CPU.
constexpr auto kMaxSleep = std::chrono::microseconds(1000);
// How long a thread waits for its disk's place for a background read or write (read-ahead,
// write-behind) before it goes back to serving misses.
constexpr auto kGatePatience = std::chrono::microseconds(500);

}  // namespace

// A sleeping thread wakes at once when the service stops: unmapping does not wait out the sleep.
void io_service::idle_wait(clock_type::time_point last_work, std::chrono::microseconds& sleep) {
  if (clock_type::now() - last_work < config_.idle_poll) {
    std::this_thread::yield();
    return;
  }
  std::unique_lock lock(stop_m_);
  stop_cv_.wait_for(lock, sleep, [this] { return stop_.load(std::memory_order_relaxed); });
  sleep = std::min(sleep * 2, kMaxSleep);
}

void io_service::stop() {
  {
    std::lock_guard lock(stop_m_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

io_service::io_service(const io_config& config, const gpu_cache_geometry& gpu, host_cache& cache,
                       request* requests, response* responses, std::uint32_t slots)
    : config_(config),
      gpu_(gpu),
      cache_(cache),
      requests_(requests),
      responses_(responses),
      slots_(slots),
      claimed_(slots),
      recent_(kRecentMisses, kNoLine),
      disk_(cache.disk()) {
  for (auto& c : claimed_) c.store(0);
  try {
    for (std::uint32_t t = 0; config_.serve && t < config_.threads; ++t) {
      threads_.emplace_back([this] { run(); });
    }
  } catch (...) {
    stop();
    throw;
  }
}

io_service::~io_service() { stop(); }

io_service::channel io_service::make_channel() const {
  channel ch;
  if (gpu_.mode == gpm::ooc::mode::write) {
    ch.staging = std::make_unique<staging_buffer>(gpu_.line_bytes +
                                                  gpu_.mask_words * sizeof(std::uint32_t));
  }
  // A resident mapping's threads fill nothing (config_.serve is off): only masks need zeros.
  if (gpu_.mode == gpm::ooc::mode::write || (config_.serve && cache_.may_fill_zeros())) {
    ch.zeros = std::make_unique<staging_buffer>(gpu_.line_bytes);  // a mask: line_bytes / 32
    std::memset(static_cast<void*>(ch.zeros->data()), 0, gpu_.line_bytes);
  }
  return ch;
}

void io_service::record(const std::string& what) {
  std::lock_guard lock(error_m_);
  last_error_ = what;
}

std::string io_service::last_error() const {
  std::lock_guard lock(error_m_);
  return last_error_;
}

void io_service::run() {
  std::uint32_t start = 0;
  try {
    check_cuda(cudaSetDevice(config_.device), "cudaSetDevice");
    channel ch = make_channel();
    flights fl;
    constexpr auto kFirstSleep = std::chrono::microseconds(8);
    auto last_work = clock_type::now();
    auto sleep = kFirstSleep;
    while (!stop_.load(std::memory_order_relaxed)) {
      if (serve_requests(ch, fl, start) || take_hints() || read_ahead_one() ||
          write_behind_one()) {
        last_work = clock_type::now();
        sleep = kFirstSleep;
      } else {
        idle_wait(last_work, sleep);
      }
    }
  } catch (const std::exception& e) {
    // Only the thread's setup can fail here (begin() and answer_oldest() answer a request's own
    // failures): the other threads serve on, and stats() reports it.
    record(std::string("an I/O thread stopped: ") + e.what());
  }
}

bool io_service::serve_requests(channel& ch, flights& fl, std::uint32_t& start) {
  bool served = false;
  for (std::uint32_t n = 0; n < slots_; ++n) {
    const std::uint32_t k = (start + n) % slots_;
    const std::uint64_t seq =
        std::atomic_ref<std::uint64_t>(requests_[k].seq).load(std::memory_order_acquire);
    std::uint64_t taken = claimed_[k].load(std::memory_order_relaxed);
    // A slot's sequence numbers only grow. `seq` was read before `taken`: a thread stalled in
    // between (a preempted I/O thread) may hold a seq that other threads have served since, and
    // claiming it would move claimed_ back, so the request after it would be served twice (its
    // slot refilled over the kernels' stores, its line evicted again from a slot that holds
    // another line by then). seq > taken means seq was unclaimed when taken was read; the CAS
    // then claims it only if nobody claimed anything since.
    if (seq <= taken || !claimed_[k].compare_exchange_strong(taken, seq)) continue;
    if (fl.depth < kServeDepth) fl.depth = serve_depth();  // it only grows, up to kServeDepth
    while (fl.count >= fl.depth) answer_oldest(fl, true);
    begin(ch, fl, k, seq, requests_[k]);
    while (fl.count > 0 && answer_oldest(fl, false)) {
    }
    served = true;
    start = k + 1;  // the next poll starts after this slot: no slot starves
  }
  while (fl.count > 0) answer_oldest(fl, true);
  return served;
}

std::uint32_t io_service::serve_depth() const {
  // pin() waits while every entry is pinned, for another thread to unpin one: a thread pinning
  // holds at most depth - 1 entries for its requests under way, so the threads together hold at
  // most threads * (depth - 1) of them, which must leave an entry free (and one for sync's
  // copies). The cache's entries only grow (their pinned segments), up to its cap.
  const std::uint64_t entries = cache_.allocated_entries();
  const std::uint64_t spare = entries > 2 ? (entries - 2) / config_.threads : 0;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(spare, kServeDepth - 1) + 1);
}

void io_service::begin(channel& ch, flights& fl, std::uint32_t k, std::uint64_t seq,
                       const request& r) {
  const std::uint32_t at = (fl.head + fl.count) % kServeDepth;
  ++fl.count;
  flight& f = fl.f[at];
  f = flight{};
  f.k = k;
  f.seq = seq;
  f.start = clock_type::now();
  try {
    if ((r.flags & kEvict) != 0) {
      copy_out(ch, r.slot, r.evict_line, (r.flags & kEvictWhole) != 0);
      f.result |= kEvicted;
    }
    std::byte* dst = gpu_.lines + static_cast<std::uint64_t>(r.slot) * gpu_.line_bytes;
    if ((r.flags & kFetch) != 0) {
      f.fetch = true;
      f.line = r.fill_line;
      f.entry = cache_.pin(r.fill_line, host_cache::purpose::fetch);
      const std::byte* src = nullptr;
      if (f.entry == host_cache::kZeros) {  // a line that can only be zeros takes no entry
        f.entry = host_cache::kNone;
        src = ch.zeros->data();
      } else {
        src = cache_.data(f.entry);
      }
      check_cuda(cudaMemcpyAsync(dst, src, gpu_.line_bytes, cudaMemcpyHostToDevice, ch.copies),
                 "cudaMemcpyAsync");
      fl.copied[at].record(ch.copies);
      f.copying = true;
    } else if ((r.flags & kZero) != 0) {
      check_cuda(
          cudaMemcpyAsync(dst, ch.zeros->data(), gpu_.line_bytes, cudaMemcpyHostToDevice, ch.copies),
          "cudaMemcpyAsync");
      fl.copied[at].record(ch.copies);
      f.copying = true;
    }
  } catch (const std::exception& e) {
    record(e.what());
    if (!f.copying && f.entry != host_cache::kNone) {
      // A copy may have been issued before what failed: it reads the entry until it ends.
      (void)cudaStreamSynchronize(ch.copies);
      (void)cudaGetLastError();
      cache_.unpin(f.entry);
      f.entry = host_cache::kNone;
    }
  }
}

bool io_service::answer_oldest(flights& fl, bool wait) {
  flight& f = fl.f[fl.head];
  if (f.copying) {
    try {
      const event& copied = fl.copied[fl.head];
      if (!wait && !copied.done()) return false;
      copied.synchronize();
      f.result |= kFilled;
    } catch (const std::exception& e) {
      record(e.what());
    }
  }
  if (f.entry != host_cache::kNone) cache_.unpin(f.entry);
  if (f.fetch && (f.result & kFilled) != 0) {
    counters_.bytes_to_gpu += gpu_.line_bytes;
    counters_.fill_ns += nanoseconds_since(f.start);
    ++counters_.fills;
    if (config_.read_ahead) note_miss(f.line);
  }
  std::atomic_ref<std::uint32_t>(responses_[f.k].result).store(f.result, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(responses_[f.k].seq).store(f.seq, std::memory_order_release);
  fl.head = (fl.head + 1) % kServeDepth;
  --fl.count;
  return true;
}

void io_service::copy_out(channel& ch, std::uint32_t slot, std::uint64_t line, bool whole) {
  const std::byte* src = gpu_.lines + static_cast<std::uint64_t>(slot) * gpu_.line_bytes;
  const std::uint32_t e = cache_.pin(line, host_cache::purpose::store);
  try {
    if (gpu_.mode == gpm::ooc::mode::write) {
      // The line holds only what kernels wrote: bring it and its mask to the staging area, clear
      // the mask for the slot's next line, then merge the written bytes into the host entry.
      std::uint32_t* mask = gpu_.mask + static_cast<std::uint64_t>(slot) * gpu_.mask_words;
      const std::size_t mask_bytes = gpu_.mask_words * sizeof(std::uint32_t);
      std::byte* staged = ch.staging->data();
      auto* staged_mask = reinterpret_cast<std::uint32_t*>(staged + gpu_.line_bytes);
      check_cuda(cudaMemcpyAsync(staged, src, gpu_.line_bytes, cudaMemcpyDeviceToHost, ch.copies),
                 "cudaMemcpyAsync");
      check_cuda(cudaMemcpyAsync(staged_mask, mask, mask_bytes, cudaMemcpyDeviceToHost, ch.copies),
                 "cudaMemcpyAsync");
      check_cuda(
          cudaMemcpyAsync(mask, ch.zeros->data(), mask_bytes, cudaMemcpyHostToDevice, ch.copies),
          "cudaMemcpyAsync");
      ch.copies.synchronize();
      cache_.store(e, staged, whole ? nullptr : staged_mask);
    } else {
      check_cuda(
          cudaMemcpyAsync(cache_.data(e), src, gpu_.line_bytes, cudaMemcpyDeviceToHost, ch.copies),
          "cudaMemcpyAsync");
      ch.copies.synchronize();
      cache_.store(e, nullptr, nullptr);
    }
  } catch (...) {
    cache_.unpin(e, true);
    throw;
  }
  cache_.unpin(e);
  ++counters_.gpu_evictions;
  counters_.bytes_from_gpu += gpu_.line_bytes;
}

std::uint64_t io_service::run_lines(std::uint64_t bytes) const {
  return std::max<std::uint64_t>(1, bytes / gpu_.line_bytes);
}

void io_service::on_workers(
    std::uint64_t runs, std::uint64_t run_bytes, std::uint64_t max_workers,
    const std::function<void(resident_worker&, std::byte*, const std::atomic<bool>&)>& work) {
  const std::uint64_t workers = std::max<std::uint64_t>(
      1, std::min<std::uint64_t>({std::uint64_t{config_.threads}, runs, max_workers}));
  const std::uint64_t halves = runs > 1 ? 2 : 1;  // any worker may take two runs
  while (resident_workers_.size() < workers) resident_workers_.emplace_back();
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(workers);
  const auto one = [&](std::uint64_t w) {
    resident_worker& rw = resident_workers_[w];
    try {
      check_cuda(cudaSetDevice(config_.device), "cudaSetDevice");
      const staging_buffer staging(halves * run_bytes);
      try {
        work(rw, staging.data(), failed);
      } catch (...) {
        // No copy of the worker's may still be landing in its buffer once it goes back.
        (void)cudaStreamSynchronize(rw.copies);
        throw;
      }
    } catch (...) {
      errors[w] = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> helpers;
  for (std::uint64_t w = 1; w < workers; ++w) helpers.emplace_back(one, w);
  one(0);
  for (std::thread& t : helpers) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void io_service::load_resident(std::uint64_t lines) {
  const std::uint64_t lb = gpu_.line_bytes;
  const bool direct = cache_.direct_file();
  const std::uint64_t run =
      std::min(run_lines(direct ? kDirectLoadRunBytes : kResidentRunBytes), lines);
  std::atomic<std::uint64_t> next_run{0};
  // Loader w takes the next run not taken, reads it into one half of its staging buffer and
  // copies it to the GPU on its own stream, reading its next run while that copy runs.
  on_workers((lines + run - 1) / run, run * lb, direct ? 1 : config_.threads,
             [&](resident_worker& rw, std::byte* staging, const std::atomic<bool>& failed) {
               for (std::uint64_t k = 0; !failed.load(std::memory_order_relaxed); ++k) {
                 const std::uint64_t first = next_run.fetch_add(1) * run;
                 if (first >= lines) break;
                 const std::uint64_t n = std::min(run, lines - first);
                 std::byte* half = staging + k % 2 * run * lb;
                 if (k >= 2) rw.copied[k % 2].synchronize();  // the copy out of it two runs ago
                 const auto read_start = std::chrono::steady_clock::now();
                 cache_.read_lines(first, n, half);
                 counters_.resident_read_ns += nanoseconds_since(read_start);
                 ++counters_.resident_reads;
                 check_cuda(cudaMemcpyAsync(gpu_.lines + first * lb, half, n * lb,
                                            cudaMemcpyHostToDevice, rw.copies),
                            "cudaMemcpyAsync");
                 rw.copied[k % 2].record(rw.copies);
                 counters_.bytes_to_gpu += n * lb;
               }
               rw.copies.synchronize();
             });
}

void io_service::store_resident(const std::vector<std::uint64_t>& lines,
                                std::vector<char>& written) {
  if (lines.empty()) return;
  const std::uint64_t lb = gpu_.line_bytes;
  const std::uint64_t run = run_lines(kResidentRunBytes);
  // Runs of consecutive lines, at most `run` lines each: [runs[i], runs[i + 1]) of `lines`.
  std::vector<std::size_t> runs{0};
  std::uint64_t longest = 0;
  for (std::size_t i = 1; i <= lines.size(); ++i) {
    if (i == lines.size() || lines[i] != lines[i - 1] + 1 || i - runs.back() == run) {
      longest = std::max<std::uint64_t>(longest, i - runs.back());
      runs.push_back(i);
    }
  }
  std::atomic<std::size_t> next_run{0};
  // Writer w takes the next run not taken and copies it from the GPU into one half of its
  // staging buffer, then writes the run it copied before while that copy runs.
  on_workers(
      runs.size() - 1, longest * lb, config_.threads,
      [&](resident_worker& rw, std::byte* staging, const std::atomic<bool>& failed) {
        const auto half = [&](std::uint64_t k) { return staging + k % 2 * longest * lb; };
        std::size_t pending = runs.size();  // the run copied last, not written yet
        for (std::uint64_t k = 0;; ++k) {
          const std::size_t r =
              failed.load(std::memory_order_relaxed) ? runs.size() : next_run.fetch_add(1);
          const bool more = r + 1 < runs.size();
          if (more) {
            const std::uint64_t first = lines[runs[r]], n = runs[r + 1] - runs[r];
            check_cuda(cudaMemcpyAsync(half(k), gpu_.lines + first * lb, n * lb,
                                       cudaMemcpyDeviceToHost, rw.copies),
                       "cudaMemcpyAsync");
            rw.copied[k % 2].record(rw.copies);
          }
          if (pending < runs.size()) {
            const std::uint64_t first = lines[runs[pending]], n = runs[pending + 1] - runs[pending];
            rw.copied[(k + 1) % 2].synchronize();
            cache_.write_lines(first, n, half(k + 1));
            std::fill(written.begin() + runs[pending], written.begin() + runs[pending + 1], 1);
            counters_.gpu_evictions += n;
            counters_.bytes_from_gpu += n * lb;
          }
          if (!more) break;
          pending = r;
        }
        rw.copies.synchronize();
      });
}

void io_service::note_miss(std::uint64_t line) {
  std::lock_guard lock(ra_m_);
  const bool sequential =
      line > 0 && std::find(recent_.begin(), recent_.end(), line - 1) != recent_.end();
  recent_[recent_next_++ % recent_.size()] = line;
  if (!sequential) return;
  // Each line is queued once per pass of the stream: the window continues from where the last
  // miss left it. Re-queueing the whole window at every miss read lines again that were read
  // ahead, then evicted by write-backs before the kernels wanted them (a streaming read_write
  // pass read each line up to 10 times), and lines that warps running late had taken already. A
  // miss more than two windows behind the queued end starts a new pass over the data.
  // The stream is queued a window at a time: once fewer than a window of lines lie queued ahead
  // of the miss, the queue runs on to two windows ahead, so the I/O threads find runs of
  // consecutive lines to read at once (read_ahead_one) instead of a line per miss.
  const std::uint64_t window = config_.read_ahead_window;
  const bool same_pass = line < ra_end_ && ra_end_ <= line + 1 + 2 * window;
  if (same_pass && ra_end_ > line + window) return;  // a window or more is queued ahead
  const std::uint64_t from = same_pass ? std::max(line + 1, ra_end_) : line + 1;
  const std::uint64_t end = line + 1 + 2 * window;
  for (std::uint64_t l = from; l < end; ++l) {
    if (ra_queued_.insert(l).second) ra_queue_.push_back(l);
  }
  ra_end_ = end;
}

void io_service::schedule_read_ahead(std::uint64_t first, std::uint64_t last) {
  std::lock_guard lock(ra_m_);
  for (std::uint64_t l = first; l <= last; ++l) {
    if (ra_queued_.insert(l).second) ra_queue_.push_back(l);
  }
}

bool io_service::take_hints() {
  if (config_.hint_slots == 0) return false;
  std::unique_lock lock(hint_m_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread is taking them
  bool took = false;
  for (std::uint32_t n = 0; n < config_.hint_slots; ++n) {
    // Only the GPU writes the ring: a plain atomic load of host memory.
    auto* entry = const_cast<std::uint64_t*>(&config_.hints[hint_cursor_ % config_.hint_slots]);
    const std::uint64_t word =
        std::atomic_ref<std::uint64_t>(*entry).load(std::memory_order_acquire);
    const auto gen = static_cast<std::uint32_t>(word >> 32);
    const auto ahead =
        static_cast<std::uint32_t>(gen - static_cast<std::uint32_t>(hint_cursor_ + 1));
    // Behind (an entry of an earlier lap) or empty: nothing new yet. Ahead: the GPU lapped the
    // ring and the hints in between are lost, which costs nothing.
    if (word == 0 || ahead >= 0x80000000u) break;
    hint_cursor_ += std::uint64_t{ahead} + 1;
    schedule_read_ahead(word & 0xffffffffull, word & 0xffffffffull);
    ++counters_.touch_hints;
    took = true;
  }
  return took;
}

// One I/O thread (of two or more) stays free for the kernels' misses: with every thread in a 16
// MiB read, a miss on a line already read ahead waited for one to end (H200, pathfinder out of
// core, a launch and a miss per row: 4.4 s -> 7.3 s). A thread's place is taken before it waits
// for the disk, so that the free thread never waits there too. The disk's place is shared with
// the other mappings' background reads and writes (disk_gate.hpp) and waited for briefly: a
// thread that gets none goes back to serving misses.
template <class Ready, class Work>
bool io_service::in_background(Ready&& ready, Work&& work, const char* what) {
  {
    std::lock_guard lock(ra_m_);
    if (background_ >= std::max<std::uint32_t>(1, config_.threads - 1) || !ready()) return false;
    ++background_;
  }
  bool did = false;
  disk_gate& gate = disk_gate::background();
  if (gate.enter(disk_, kGatePatience)) {
    try {
      did = work();
    } catch (const std::exception& e) {
      record(what + std::string(e.what()));
    }
    gate.leave(disk_);
  }
  std::lock_guard lock(ra_m_);
  --background_;
  return did;
}

bool io_service::read_ahead_one() {
  return in_background(
      [&] { return !ra_queue_.empty(); },
      [&] {
        std::uint64_t first = 0, n = 0;
        {
          std::lock_guard lock(ra_m_);
          // The queued lines that follow the first one, up to a run's bytes, go in one read.
          const std::uint64_t most = config_.read_ahead_run;
          while (!ra_queue_.empty() && n < most && (n == 0 || ra_queue_.front() == first + n)) {
            if (n == 0) first = ra_queue_.front();
            ra_queued_.erase(ra_queue_.front());
            ra_queue_.pop_front();
            ++n;
          }
        }
        if (n > 0) cache_.read_ahead(first, n);
        return n > 0;
      },
      "read-ahead: ");
}

bool io_service::write_behind_one() {
  return in_background([&] { return cache_.write_behind_wanted(); },
                       [&] { return cache_.write_behind(); }, "write-behind: ");
}

}  // namespace gpm::detail::ooc
