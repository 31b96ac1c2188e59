// gpm::ooc::mapping host side: validating a mapping, sizing and allocating the GPU cache, its
// request queue and the host cache, starting the I/O threads, and sync / prefetch / unmap /
// stats. The device side is include/gpm/ooc/detail/engine.cuh.
#include <gpm/ooc/mapping.cuh>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include <unistd.h>

#include <gpm/ooc/detail/file.hpp>
#include <gpm/platform/detail/file_path.hpp>
#include <gpm/platform/elapsed.hpp>
#include <gpm/platform/kernel.cuh>

#include "epoch_log.hpp"
#include "host_cache.hpp"
#include "io_service.hpp"

namespace gpm::ooc {

const char* to_string(mode m) noexcept {
  switch (m) {
    case mode::read_write: return "read_write";
    case mode::read: return "read";
    case mode::write: return "write";
    case mode::volatile_data: return "volatile_data";
  }
  return "unknown";
}

const char* to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::out_of_range: return "out_of_range";
    case status::read_only: return "read_only";
    case status::write_only: return "write_only";
    case status::io_error: return "io_error";
  }
  return "unknown";
}

namespace {

using namespace gpm::detail::ooc;

constexpr std::uint64_t kMaxLineBytes = 2ull << 20;
constexpr std::uint64_t kMinGpuLineBytes = 64ull << 10;
constexpr std::uint64_t kMinEmulatedLineBytes = 256;
constexpr std::uint64_t kDefaultHostCacheBytes = 1ull << 30;
// Runs of up to 16 MiB are read ahead (io_service::read_ahead_one); with two windows queued
// ahead, the next run is queued before the last one's lines are used.
constexpr std::uint64_t kDefaultReadAheadBytes = 32ull << 20;
constexpr std::uint64_t kMaxReadAheadRunBytes = 1ull << 30;
constexpr std::uint32_t kMaxIdlePollUs = 1'000'000;
// The host cache pins its memory this many bytes at a time (or what the I/O threads pin at once,
// if more), as lines arrive.
constexpr std::uint64_t kHostCacheSegmentBytes = 32ull << 20;
// The host cache of a resident mapping takes only the lines that the sync of a mode::write or
// crash-consistent mapping copies out line by line (the load and the read_write write-back stage
// through staging.hpp's pool), so it takes at most this much of host_cache_bytes, pinned at the
// first such sync: pinning the whole cap cost more at map time than reading the data did.
constexpr std::uint64_t kResidentHostCacheBytes = kHostCacheSegmentBytes;
// Tags hold line + 1 in 32 bits (0: an empty slot).
constexpr std::uint64_t kMaxLines = 0xffffffffull - 1;
constexpr std::uint32_t kTouchThreads = 128;
constexpr std::uint32_t kHintSlots = 1024;  // lines touch() can have posted before the host reads
constexpr std::uint32_t kMaxTouchBlocks = 1024;

// Brings lines [first, first + n) into the GPU cache (prefetch).
__global__ void touch_lines(cache_view v, std::uint64_t first, std::uint64_t n) {
  for (std::uint64_t l : grid_stride(n)) {
    std::uint32_t slot = 0;
    if (acquire_line(v, first + l, slot) == status::ok) release_line(v, slot);
  }
}

std::string spill_directory(const std::string& path, const mapping_options& o) {
  if (!o.spill_dir.empty()) return o.spill_dir;
  if (!path.empty()) {
    const std::filesystem::path parent =
        std::filesystem::path(gpm::detail::absolute_path(path)).parent_path();
    if (!parent.empty()) return parent.string();
  }
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) {
    throw_error(errc::invalid_argument,
                "gpm::ooc: scratch data has no spill directory: the system's temporary directory "
                "(TMPDIR) is unusable (" + ec.message() + "): name one in mapping_options::spill_dir");
  }
  return tmp.string();
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

// What a mapping holds while mapped; destroyed members in reverse order, the I/O threads first.
struct live_state {
  std::vector<std::unique_ptr<backing_file>> files;  // none for volatile scratch data
  // The files as an epoch is written into them, in stripe order.
  epoch_target targets() const {
    epoch_target t;
    for (const auto& f : files) t.push_back(f.get());
    return t;
  }
  std::unique_ptr<epoch_log> log;  // crash-consistent mappings
  // volatile data (unlinked); crash-consistent staging (the log's staging file, which a committed
  // epoch may name: removed at unmap unless one is left to apply)
  std::unique_ptr<backing_file> spill;
  // The GPU cache, its metadata and the request queue's GPU side in one allocation (one
  // cudaMalloc and one cudaFree a mapping, one memset for the arrays that start as zeros): the
  // arrays of the kernels' view (cache_view) point into it; allocate_gpu_cache lays it out.
  device_buffer<std::byte> gpu;
  pinned_buffer<std::uint64_t> hints;
  pinned_buffer<request> requests;
  pinned_buffer<response> responses;
  std::unique_ptr<host_cache> cache;
  std::unique_ptr<io_service::channel> sync_channel;
  std::unique_ptr<io_service> io;
  cache_view view;
  std::uint64_t syncs = 0;
  std::uint64_t epochs = 0;

  ~live_state() {
    io.reset();  // nothing stages once the I/O threads are gone
    if (log && spill && !log->committed()) ::unlink(log->staging_path().c_str());
  }
};

struct mapping::impl {
  std::vector<std::string> paths;
  std::string name;  // for messages: the file, the files striped over, or "scratch data"
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  mapping_options options;
  std::uint32_t line_shift = 0;
  std::uint64_t line_count = 0;
  std::uint32_t capacity = 0;
  std::uint64_t host_lines = 0;
  std::uint32_t read_ahead_window = 0;
  std::uint32_t read_ahead_run = 1;  // lines
  // The GPU cache holds every line and options.resident is on: loaded whole at map time, accessed
  // directly, no misses (see make_resident).
  bool resident = false;
  int clock_khz = 0;
  epoch_recovery recovery;
  double map_seconds = 0, map_allocate_seconds = 0, map_gpu_cache_seconds = 0,
         map_host_cache_seconds = 0, map_load_seconds = 0;  // mapping_stats
  std::unique_ptr<live_state> live;

  live_state& state() const {
    if (!live) throw_error(errc::invalid_argument, "gpm::ooc::mapping of " + name + " is unmapped");
    return *live;
  }
  std::uint64_t line_bytes() const { return options.line_bytes; }
  // Lines [first, last] covering bytes [off, off + bytes) of the mapping; {1, 0} when empty.
  std::pair<std::uint64_t, std::uint64_t> lines_of(std::uint64_t off, std::uint64_t bytes) const {
    if (off > size || bytes > size - off) {
      throw_error(errc::invalid_argument, "range [" + std::to_string(off) + ", +" +
                                              std::to_string(bytes) +
                                              ") lies outside the mapping of " +
                                              std::to_string(size) + " bytes of " + name);
    }
    if (bytes == 0) return {1, 0};
    return {off >> line_shift, (off + bytes - 1) >> line_shift};
  }
};

namespace {

void validate(const mapping_options& o, const mapping::impl& m, bool emulated) {
  const std::string what = "gpm::ooc::mapping of " + m.name + ": ";
  const std::uint64_t min_line = emulated ? kMinEmulatedLineBytes : kMinGpuLineBytes;
  if (o.line_bytes < min_line || o.line_bytes > kMaxLineBytes ||
      (o.line_bytes & (o.line_bytes - 1)) != 0) {
    throw_error(errc::invalid_argument, what + "line_bytes " + std::to_string(o.line_bytes) +
                                            " must be a power of two from " +
                                            std::to_string(min_line) + " to " +
                                            std::to_string(kMaxLineBytes));
  }
  if (o.io_threads < 1 || o.io_threads > 64) {
    throw_error(errc::invalid_argument, what + "io_threads must be 1 to 64");
  }
  if (o.queue_slots < 1 || o.queue_slots > 65536) {
    throw_error(errc::invalid_argument, what + "queue_slots must be 1 to 65536");
  }
  if (o.idle_poll_us > kMaxIdlePollUs) {
    throw_error(errc::invalid_argument, what + "idle_poll_us " + std::to_string(o.idle_poll_us) +
                                            " is more than 1,000,000 (one second)");
  }
  if (o.read_ahead_run_bytes > kMaxReadAheadRunBytes) {
    throw_error(errc::invalid_argument, what + "read_ahead_run_bytes " +
                                            std::to_string(o.read_ahead_run_bytes) +
                                            " is more than 1 GiB");
  }
  if (m.paths.empty()) throw_error(errc::invalid_argument, what + "no file is named");
  // Paths with a NUL byte are refused here, before any file is opened, created or extended (a
  // striped range's first file too); recover_epoch_log and inspect_epoch_log refuse them in
  // epoch_log_path.
  gpm::detail::require_no_nul(o.spill_dir, "mapping_options::spill_dir");
  for (const std::string& p : m.paths) {
    gpm::detail::require_no_nul(p, "gpm::ooc: the file path");
    if (p.empty() && (m.paths.size() > 1 || o.mode != mode::volatile_data)) {
      throw_error(errc::invalid_argument, what +
                                              "a file path is empty (only mode::volatile_data "
                                              "maps scratch data without a file)");
    }
  }
  if (o.create && (o.mode == mode::read || o.mode == mode::volatile_data)) {
    throw_error(
        errc::invalid_argument,
        what + "create needs mode::read_write or mode::write, not mode::" + to_string(o.mode));
  }
  if (o.crash_consistent && (o.mode == mode::read || o.mode == mode::volatile_data)) {
    throw_error(errc::invalid_argument,
                what + "crash_consistent needs mode::read_write or mode::write, not mode::" +
                    to_string(o.mode) + " (it makes the file's changes all-or-nothing)");
  }
  if (m.size == 0) throw_error(errc::invalid_argument, what + "cannot map 0 bytes");
  const std::uint64_t lines = (m.size - 1) / o.line_bytes + 1;
  if (lines > kMaxLines) {
    throw_error(errc::invalid_argument, what + std::to_string(m.size) + " bytes make more than " +
                                            std::to_string(kMaxLines) + " lines: use larger lines");
  }
  if (m.paths.size() > lines) {
    throw_error(errc::invalid_argument,
                what + std::to_string(m.paths.size()) + " files cannot share " +
                    std::to_string(lines) +
                    " lines: stripe over fewer files, or use smaller lines");
  }
}

// Bytes of the mapping that file k of n holds when lines are striped over the files (the whole
// mapping when n = 1): its lines k, k + n, ..., the last of the mapping possibly partial.
std::uint64_t file_share(const mapping::impl& m, std::uint64_t k) {
  const std::uint64_t n = m.paths.size();
  const std::uint64_t lines = (m.line_count - k + n - 1) / n;
  const std::uint64_t last = m.line_count - 1;
  const std::uint64_t short_by = last % n == k ? m.line_count * m.options.line_bytes - m.size : 0;
  return lines * m.options.line_bytes - short_by;
}

std::string describe(const std::vector<std::string>& paths) {
  if (paths.size() == 1) return paths[0].empty() ? "scratch data" : paths[0];
  std::string s = "data striped over";
  for (const std::string& p : paths) s += " " + p;
  return s;
}

// The clock rate of `device` in kHz (stats' wait seconds), read once per device per process: the
// attribute query took 0.51-0.56 ms a call on an H200 with CUDA 13 (docs/out-of-core.md,
// "Resident mappings"), and a device's properties cannot change while it runs.
int clock_khz(int device) {
  static std::mutex m;
  static std::map<int, int> known;
  const std::lock_guard lock(m);
  if (const auto it = known.find(device); it != known.end()) return it->second;
  int khz = 0;
  check_cuda(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute");
  known.emplace(device, khz);
  return khz;
}

std::uint64_t free_gpu_bytes() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return free_bytes;
}

// GPU cache lines, host cache lines and the read-ahead window of a mapping (see the options).
void size_caches(mapping::impl& m, std::uint64_t free_bytes) {
  const mapping_options& o = m.options;
  const std::uint64_t lb = o.line_bytes;
  const std::string what = "gpm::ooc::mapping of " + m.name + ": ";
  std::uint64_t capacity = 0;
  if (o.gpu_cache_bytes == 0) {
    capacity = std::min<std::uint64_t>(m.line_count, free_bytes / 4 / lb);
    if (capacity == 0) {
      throw_error(errc::out_of_memory, what + "a quarter of the free GPU memory (" +
                                           mib(free_bytes) + ") holds no line of " +
                                           std::to_string(lb) + " bytes");
    }
  } else {
    capacity = std::min<std::uint64_t>(m.line_count, o.gpu_cache_bytes / lb);
    if (capacity == 0) {
      throw_error(errc::invalid_argument, what + "gpu_cache_bytes " +
                                              std::to_string(o.gpu_cache_bytes) +
                                              " holds no line of " + std::to_string(lb) + " bytes");
    }
  }
  m.capacity = static_cast<std::uint32_t>(std::min<std::uint64_t>(capacity, kMaxSlots));

  const std::uint64_t min_host = 2ull * o.io_threads + 2;
  if (o.host_cache_bytes == 0) {
    m.host_lines = std::max(min_host, std::min(m.line_count, kDefaultHostCacheBytes / lb));
  } else {
    m.host_lines = o.host_cache_bytes / lb;
    if (m.host_lines < min_host) {
      throw_error(errc::invalid_argument,
                  what + "host_cache_bytes " + std::to_string(o.host_cache_bytes) +
                      " must hold at least " + std::to_string(min_host) + " lines of " +
                      std::to_string(lb) + " bytes (2 per I/O thread and 2 more)");
    }
    m.host_lines = std::max(min_host, std::min(m.host_lines, m.line_count));
  }
  m.resident = o.resident && m.capacity == m.line_count;
  if (m.resident) {
    m.host_lines = std::max(min_host, std::min(m.host_lines, kResidentHostCacheBytes / lb));
  }
  const std::uint64_t window = o.read_ahead_window != 0
                                   ? o.read_ahead_window
                                   : std::max<std::uint64_t>(2, kDefaultReadAheadBytes / lb);
  m.read_ahead_window =
      static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min(window, m.host_lines / 4)));
  const std::uint64_t run =
      o.read_ahead_run_bytes != 0 ? o.read_ahead_run_bytes : kReadAheadRunBytes;
  m.read_ahead_run = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, run / lb));
}

// Copies between host vectors and arrays of the GPU slab (live_state::gpu).
template <class T>
void to_gpu(T* dst, const std::vector<T>& src) {
  check_cuda(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice),
             "cudaMemcpy");
}
template <class T>
void from_gpu(std::vector<T>& dst, const T* src) {
  check_cuda(cudaMemcpy(dst.data(), src, dst.size() * sizeof(T), cudaMemcpyDeviceToHost),
             "cudaMemcpy");
}

// Allocates and clears the GPU cache and the request queue, and fills in the kernels' view. A
// resident mapping has no misses, fills or hints: it gets no queue, hint ring or slot generations
// (make_resident sets its directory and slot words).
void allocate_gpu_cache(live_state& s, const mapping::impl& m, std::uint64_t free_bytes) {
  const std::uint64_t lb = m.options.line_bytes;
  const std::uint32_t slots = m.options.queue_slots;
  const std::uint32_t mask_words =
      m.options.mode == mode::write ? static_cast<std::uint32_t>(lb / kMaskGranule / 32) : 0;
  // One slab (live_state::gpu): the lines first (the allocation's alignment), then the arrays
  // that start as zeros, cleared by one memset, then the directory, each at a 256-byte boundary.
  const bool misses = !m.resident;
  std::uint64_t at = 0;
  const auto place = [&at](std::uint64_t array_bytes) {
    const std::uint64_t offset = at;
    at = (at + array_bytes + 255) / 256 * 256;
    return offset;
  };
  const std::uint64_t lines_at = place(m.capacity * lb);
  const std::uint64_t zeros_at = at;
  const std::uint64_t dirty_at = place(m.capacity * 4ull);
  const std::uint64_t mask_at = place(std::uint64_t{m.capacity} * mask_words * 4);
  const std::uint64_t counters_at = place(kCounterShards * kShardStride * 8ull);
  const std::uint64_t slot_word_at = place(m.capacity * 8ull);
  const std::uint64_t slot_gen_at = place(misses ? m.capacity * 4ull : 0);
  const std::uint64_t clock_at = place(misses ? 4 : 0);
  const std::uint64_t owner_at = place(misses ? slots * 4ull : 0);
  const std::uint64_t next_seq_at = place(misses ? slots * 8ull : 0);
  const std::uint64_t hint_next_at = place(misses ? 8 : 0);
  const std::uint64_t hint_recent_at = place(misses ? kHintSlots * 8ull : 0);
  const std::uint64_t zeros_end = at;
  const std::uint64_t directory_at = place(m.line_count * 8);
  const std::uint64_t bytes = at;
  if (free_bytes != 0 && bytes > free_bytes) {
    throw_error(errc::out_of_memory, "gpm::ooc::mapping of " + m.name + ": the GPU cache needs " +
                                         mib(bytes) + " and " + mib(free_bytes) +
                                         " are free: lower gpu_cache_bytes");
  }
  try {
    s.gpu = device_buffer<std::byte>(bytes);
    if (misses) {
      s.hints = pinned_buffer<std::uint64_t>(kHintSlots, true);
      s.requests = pinned_buffer<request>(slots, true);
      s.responses = pinned_buffer<response>(slots, true);
    }
  } catch (const gpm::error& e) {
    throw_error(errc::out_of_memory, "gpm::ooc::mapping of " + m.name +
                                         ": cannot allocate its GPU cache and queue (the cache "
                                         "needs " +
                                         mib(bytes) + ", " + mib(free_gpu_bytes()) +
                                         " of GPU memory are free): " + e.what() +
                                         ": lower gpu_cache_bytes");
  }
  std::byte* base = s.gpu.data();
  check_cuda(cudaMemset(base + zeros_at, 0, zeros_end - zeros_at), "cudaMemset");
  if (misses) {
    check_cuda(cudaMemset(base + directory_at, 0xff, m.line_count * 8), "cudaMemset");  // kNoSlot
    std::memset(static_cast<void*>(s.hints.data()), 0, s.hints.bytes());
    std::memset(static_cast<void*>(s.requests.data()), 0, s.requests.bytes());
    std::memset(static_cast<void*>(s.responses.data()), 0, s.responses.bytes());
  }
  const auto in_slab = [base, misses](std::uint64_t offset, bool always) {
    return always || misses ? static_cast<void*>(base + offset) : nullptr;
  };

  cache_view& v = s.view;
  v.lines = base + lines_at;
  v.slot_word = static_cast<std::uint64_t*>(in_slab(slot_word_at, true));
  v.slot_gen = static_cast<std::uint32_t*>(in_slab(slot_gen_at, false));
  v.dirty = static_cast<std::uint32_t*>(in_slab(dirty_at, true));
  v.mask = static_cast<std::uint32_t*>(in_slab(mask_at, true));
  v.directory = static_cast<std::uint64_t*>(in_slab(directory_at, true));
  v.clock_hand = static_cast<std::uint32_t*>(in_slab(clock_at, false));
  v.counters = static_cast<unsigned long long*>(in_slab(counters_at, true));
  v.queue = queue_view{s.requests.device_data(), s.responses.device_data(),
                       static_cast<std::uint32_t*>(in_slab(owner_at, false)),
                       static_cast<std::uint64_t*>(in_slab(next_seq_at, false)), slots};
  v.hints = s.hints.device_data();
  v.hint_next = static_cast<unsigned long long*>(in_slab(hint_next_at, false));
  v.hint_recent = static_cast<unsigned long long*>(in_slab(hint_recent_at, false));
  v.hint_slots = kHintSlots;
  v.bytes = m.size;
  v.line_count = m.line_count;
  v.line_shift = m.line_shift;
  v.capacity = m.capacity;
  v.mask_words = mask_words;
  v.mapping_mode = m.options.mode;
}

// Loads every line into its own slot (slot l holds line l for good; the directory and slot words
// say so too, so sync() and stats() see an ordinary cache that happens to hold everything) and
// switches the kernels' view to direct access. Only the lines the files may hold data in are read
// and copied; the rest (past what the files held before create extended them, all of mode::write
// and of scratch data) can only be zeros, set by a device memset: zeros were read (or set) into
// staging and copied across PCIe, which an output mapping of a fresh file paid for in full.
void make_resident(live_state& s, const mapping::impl& m) {
  const std::uint64_t held = m.options.mode == mode::write ? 0 : s.cache->held_lines();
  if (held > 0) s.io->load_resident(held);
  if (held < m.line_count) {
    const std::uint64_t lb = m.line_bytes();
    check_cuda(cudaMemset(s.view.lines + held * lb, 0, (m.line_count - held) * lb), "cudaMemset");
  }
  std::vector<std::uint64_t> directory(m.line_count);
  std::vector<std::uint64_t> words(m.line_count);
  for (std::uint64_t l = 0; l < m.line_count; ++l) {
    directory[l] = dir_entry(static_cast<std::uint32_t>(l), 0);
    words[l] = (l + 1) << 32;  // tag line + 1, not busy, no reference
  }
  to_gpu(s.view.directory, directory);
  to_gpu(s.view.slot_word, words);
  s.view.resident = true;
}

}  // namespace

mapping::mapping(const std::string& path, std::uint64_t size, std::uint64_t offset,
                 const mapping_options& options)
    : mapping(std::vector<std::string>{path}, size, offset, options) {}

mapping::mapping(const std::vector<std::string>& paths, std::uint64_t size, std::uint64_t offset,
                 const mapping_options& options)
    : impl_(std::make_unique<impl>()) {
  const auto map_start = std::chrono::steady_clock::now();
  impl& m = *impl_;
  m.paths = paths;
  m.name = describe(paths);
  m.size = size;
  m.offset = offset;
  m.options = options;
  // query_device() reads every device property, milliseconds on a GPU, for each mapping of a
  // program that maps many; what a mapping needs of it (a device at all, emulated or not) cannot
  // change while the process runs.
  static const device_info dev = query_device();
  if (!dev.present) {
    throw_error(errc::no_device, "gpm::ooc::mapping needs a GPU: " + dev.absent_reason);
  }
  validate(options, m, dev.emulated);
  m.line_shift = static_cast<std::uint32_t>(__builtin_ctzll(options.line_bytes));
  m.line_count = (size - 1) / options.line_bytes + 1;

  auto s = std::make_unique<live_state>();
  const mode md = options.mode;
  const std::string& first = paths.front();
  if (!first.empty()) {
    const bool writable = md == mode::read_write || md == mode::write;
    for (std::uint64_t k = 0; k < paths.size(); ++k) {
      s->files.push_back(std::make_unique<backing_file>(
          paths[k], file_share(m, k), offset, writable, options.create, options.direct_io));
    }
  }
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  m.clock_khz = clock_khz(device);
  // Free GPU memory sizes an automatic GPU cache (gpu_cache_bytes 0). With a size given it is read
  // only to explain an allocation that failed.
  const std::uint64_t free_bytes = options.gpu_cache_bytes == 0 ? free_gpu_bytes() : 0;
  // Before the data is read, the file must be at its newest committed epoch: a writing mapping
  // recovers the range; one that only reads cannot, and refuses a range with an epoch pending.
  // A striped range has one log, beside its first file.
  const bool has_log = !first.empty() && gpm::detail::path_exists(epoch_log_path(first, offset));
  if (md == mode::read_write || md == mode::write) {
    if (options.crash_consistent || has_log) {
      const stripe_set files{paths, options.line_bytes};
      auto log = std::make_unique<epoch_log>(first, offset, &files);
      m.recovery = log->recover(s->targets());
      if (options.crash_consistent) {
        s->log = std::move(log);
      } else {
        ::unlink(log->staging_path().c_str());  // what a crashed mapping staged: applied or void
      }
    }
  } else if (has_log) {
    const epoch_log_info info = inspect_epoch_log(first, offset);
    if (info.pending) {
      throw_error(errc::busy, m.name + " has committed epoch " + std::to_string(info.epoch) +
                                  " in its epoch log, maybe not in the file yet: map it for "
                                  "writing once, or run gpmkit ooc recover, before reading it");
    }
    m.recovery.epoch = info.epoch;
  }
  size_caches(m, free_bytes);
  // Resident volatile data never leaves the GPU: it needs no spill file.
  if (options.crash_consistent) {
    // After recovery, which may have read a committed epoch's lines from the staging file.
    s->spill = std::make_unique<backing_file>(backing_file::named_scratch(s->log->staging_path()));
  } else if (md == mode::volatile_data && !m.resident) {
    s->spill =
        std::make_unique<backing_file>(backing_file::temporary(spill_directory(first, options)));
  }

  const auto allocate_start = std::chrono::steady_clock::now();
  allocate_gpu_cache(*s, m, free_bytes);
  m.map_gpu_cache_seconds = seconds_since(allocate_start);

  const std::uint64_t lb = options.line_bytes;
  std::vector<const backing_file*> files;
  for (const auto& f : s->files) files.push_back(f.get());
  const auto host_cache_start = std::chrono::steady_clock::now();
  try {
    const std::uint64_t segment =
        std::max<std::uint64_t>(kHostCacheSegmentBytes, (2ull * options.io_threads + 2) * lb);
    s->cache = std::make_unique<host_cache>(
        host_cache_config{md, lb, size, m.host_lines, options.crash_consistent, segment,
                          !m.resident, options.write_behind},
        std::move(files), s->spill.get());
  } catch (const gpm::error& e) {
    throw_error(errc::out_of_memory, "gpm::ooc::mapping of " + m.name + ": cannot allocate " +
                                         mib(m.host_lines * lb) + " of pinned host cache (" +
                                         e.what() + "): lower host_cache_bytes");
  }
  m.map_host_cache_seconds = seconds_since(host_cache_start);
  const cache_view& v = s->view;
  const gpu_cache_geometry geometry{v.lines, v.mask, lb, v.mask_words, md};
  const bool read_ahead = options.hint == access_hint::sequential && md != mode::write;
  s->io = std::make_unique<io_service>(
      io_config{options.io_threads, !m.resident, device, read_ahead, m.read_ahead_window,
                m.read_ahead_run, s->hints.data(), kHintSlots,
                std::chrono::microseconds(options.idle_poll_us)},
      geometry, *s->cache, s->requests.data(), s->responses.data(), options.queue_slots);
  s->sync_channel = std::make_unique<io_service::channel>(s->io->make_channel());
  m.map_allocate_seconds = seconds_since(allocate_start);
  if (m.resident) {
    const auto load_start = std::chrono::steady_clock::now();
    make_resident(*s, m);
    m.map_load_seconds = seconds_since(load_start);
  }
  m.live = std::move(s);
  m.map_seconds = seconds_since(map_start);
}

mapping::~mapping() {
  if (!impl_ || !impl_->live) return;
  try {
    unmap();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpm::ooc: unmapping %s failed and its unwritten changes are lost: %s\n",
                 impl_->name.c_str(), e.what());
  }
}

mapping::mapping(mapping&&) noexcept = default;

mapping& mapping::operator=(mapping&& o) noexcept {
  if (this != &o) {
    mapping old(std::move(*this));  // unmaps the current one as it goes
    impl_ = std::move(o.impl_);
  }
  return *this;
}

mapping::impl& mapping::self() const {
  if (!impl_) {
    throw_error(errc::invalid_argument, "gpm::ooc::mapping: this mapping was moved from");
  }
  return *impl_;
}

void mapping::check_element(std::size_t bytes) const {
  const impl& m = self();
  m.state();
  const std::string what = "gpm::ooc::mapping of " + m.name + ": ";
  if (m.size % bytes != 0) {
    throw_error(errc::invalid_argument, what + "its " + std::to_string(m.size) +
                                            " bytes are not a whole number of " +
                                            std::to_string(bytes) + "-byte elements");
  }
  if (m.line_bytes() % bytes != 0) {
    throw_error(errc::invalid_argument, what + "its lines of " + std::to_string(m.line_bytes()) +
                                            " bytes are not a whole number of " +
                                            std::to_string(bytes) + "-byte elements");
  }
  if (m.options.mode == mode::write && bytes % kMaskGranule != 0) {
    throw_error(errc::invalid_argument,
                what + "mode::write tracks written bytes in 4-byte granules: elements of " +
                    std::to_string(bytes) + " bytes would write neighbours' bytes back");
  }
}

detail::ooc::cache_view mapping::view() const { return self().state().view; }

// The crash-consistent write-back of lines [first, last]: their changes since the last epoch
// (staged in the spill file or dirty in the host cache) become the next epoch of the log, which
// is committed, then written in place (epoch_log.hpp). A failure before the commit leaves the file
// and the caches as they were; after it, the epoch is durable and the next sync (or mapping)
// finishes writing it.
namespace {

void commit_epoch(live_state& s, std::uint64_t lb, std::uint64_t first, std::uint64_t last) {
  const epoch_target data = s.targets();
  s.log->recover(data);  // a sync that failed after its commit left that epoch to finish
  struct sink {
    epoch_log* log;
    std::uint64_t line_bytes;
  } k{s.log.get(), lb};
  // A staged line's record names its place in the staging file (a log of an older gpmkit takes a
  // copy), which the host cache then keeps until the epoch is in the file.
  s.cache->log_epoch(
      first, last,
      [](void* ctx, std::uint64_t line, const std::byte* bytes, std::uint64_t valid,
         const std::uint32_t* mask, std::uint32_t mask_words, std::uint64_t staged_at) {
        const auto* c = static_cast<sink*>(ctx);
        if (staged_at != host_cache::kNotStaged && c->log->stages_by_reference()) {
          c->log->append_staged(line * c->line_bytes, bytes, valid, mask, mask_words, staged_at);
        } else {
          c->log->append(line * c->line_bytes, bytes, valid, mask, mask_words);
        }
      },
      &k);
  bool committed = false;
  try {
    if (s.log->pending_records() == 0) {  // nothing changed: no epoch
      s.cache->release_epoch(false);
      return;
    }
    s.log->commit();
    committed = true;
    s.log->apply(data);
  } catch (...) {
    s.cache->release_epoch(committed);
    throw;
  }
  s.cache->finish_epoch(first, last);
  ++s.epochs;
}

}  // namespace

void mapping::sync() { sync(0, self().size); }

void mapping::sync(std::uint64_t offset, std::uint64_t bytes) {
  impl& m = self();
  live_state& s = m.state();
  const auto [first, last] = m.lines_of(offset, bytes);
  if (bytes == 0 || m.options.mode == mode::read || m.options.mode == mode::volatile_data) return;
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  // Dirty lines in the GPU cache go to the host cache first; those copied are clean from then on.
  std::vector<std::uint32_t> dirty(m.capacity);
  from_gpu(dirty, s.view.dirty);
  const bool gpu_dirty =
      std::any_of(dirty.begin(), dirty.end(), [](std::uint32_t d) { return d != kClean; });
  std::vector<std::uint64_t> words(gpu_dirty ? m.capacity : 0);
  if (gpu_dirty) from_gpu(words, s.view.slot_word);
  std::string failure;
  const auto in_range = [&](std::uint32_t slot) {
    if (dirty[slot] == kClean) return false;
    const std::uint64_t tag = tag_of(words[slot]);
    return tag != 0 && tag - 1 >= first && tag - 1 <= last;
  };
  if (m.resident && m.options.mode == mode::read_write && !s.log) {
    // Straight from the GPU to the files in runs (slot l holds line l): several writers, each
    // copying a run while it writes the one before. Through the host cache line by line, a sync
    // copied a line, then wrote it, then the next.
    std::vector<std::uint64_t> lines;
    for (std::uint32_t slot = 0; slot < m.capacity; ++slot) {
      if (in_range(slot)) lines.push_back(slot);
    }
    std::vector<char> written(lines.size(), 0);
    try {
      s.io->store_resident(lines, written);
    } catch (const gpm::error& e) {
      failure = e.what();
    }
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (written[i] != 0) dirty[lines[i]] = kClean;
    }
  } else {
    for (std::uint32_t slot = 0; slot < m.capacity && failure.empty(); ++slot) {
      if (!in_range(slot)) continue;
      try {
        s.io->copy_out(*s.sync_channel, slot, tag_of(words[slot]) - 1, dirty[slot] == kDirtyWhole);
        dirty[slot] = kClean;
      } catch (const gpm::error& e) {
        failure = e.what();
      }
    }
  }
  if (gpu_dirty) to_gpu(s.view.dirty, dirty);
  if (!failure.empty()) throw_error(errc::io, failure);
  if (s.log) {
    commit_epoch(s, m.line_bytes(), first, last);
  } else {
    s.cache->write_back(first, last);
    for (const auto& f : s.files) f->datasync();
  }
  ++s.syncs;
}

void mapping::prefetch(std::uint64_t offset, std::uint64_t bytes, cudaStream_t stream) {
  impl& m = self();
  live_state& s = m.state();
  const auto [first, last] = m.lines_of(offset, bytes);
  if (bytes == 0 || m.options.mode == mode::write || s.view.resident) return;
  s.io->schedule_read_ahead(first, std::min(last, first + m.host_lines - 1));
  const std::uint64_t n = std::min<std::uint64_t>(last - first + 1, m.capacity);
  const auto blocks = static_cast<std::uint32_t>(
      std::min<std::uint64_t>((n + kTouchThreads - 1) / kTouchThreads, kMaxTouchBlocks));
  launch(touch_lines, blocks, kTouchThreads, 0, stream, s.view, first, n);
}

void mapping::unmap() {
  if (!impl_ || !impl_->live) return;
  const mode md = impl_->options.mode;
  if (md == mode::read_write || md == mode::write) {
    sync();  // waits for the device first
  } else {
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  impl_->live.reset();
}

bool mapping::mapped() const { return impl_ && impl_->live; }

mapping_stats mapping::stats() const {
  const impl& m = self();
  const live_state& s = m.state();
  std::vector<unsigned long long> shards(kCounterShards * kShardStride);
  from_gpu(shards, s.view.counters);
  std::uint64_t sum[kCounters] = {};
  for (std::uint32_t sh = 0; sh < kCounterShards; ++sh) {
    for (std::uint32_t c = 0; c < kCounters; ++c) sum[c] += shards[sh * kShardStride + c];
  }
  mapping_stats r;
  r.gpu_hits = sum[kHits];
  r.gpu_misses = sum[kMisses];
  r.gpu_io_errors = sum[kIoErrors];
  r.gpu_wait_seconds =
      m.clock_khz > 0 ? static_cast<double>(sum[kWaitCycles]) / (m.clock_khz * 1e3) : 0;
  const io_counters& io = s.io->counters();
  r.gpu_evictions = io.gpu_evictions;
  r.bytes_to_gpu = io.bytes_to_gpu;
  r.bytes_from_gpu = io.bytes_from_gpu;
  r.touch_hints = io.touch_hints;
  r.resident_reads = io.resident_reads;
  r.resident_read_seconds = static_cast<double>(io.resident_read_ns) * 1e-9;
  r.fills = io.fills;
  r.fill_seconds = static_cast<double>(io.fill_ns) * 1e-9;
  r.map_seconds = m.map_seconds;
  r.map_allocate_seconds = m.map_allocate_seconds;
  r.map_gpu_cache_seconds = m.map_gpu_cache_seconds;
  r.map_host_cache_seconds = m.map_host_cache_seconds;
  r.map_load_seconds = m.map_load_seconds;
  const host_cache_counters& h = s.cache->counters();
  r.host_hits = h.hits;
  r.host_misses = h.misses;
  r.host_evictions = h.evictions;
  r.host_cache_bytes_pinned = s.cache->allocated_entries() * m.line_bytes();
  r.read_ahead_lines = h.read_ahead_lines;
  r.read_ahead_reads = h.read_ahead_reads;
  r.read_ahead_read_seconds = static_cast<double>(h.read_ahead_read_ns) * 1e-9;
  r.read_ahead_hits = h.read_ahead_hits;
  r.file_bytes_read = h.file_bytes_read;
  r.file_bytes_written = h.file_bytes_written;
  r.write_behind_lines = h.write_behind_lines;
  r.spill_bytes_written = h.spill_bytes_written;
  r.spill_bytes_read = h.spill_bytes_read;
  r.spill_bytes_held = s.spill ? s.spill->allocated_bytes() : 0;
  r.syncs = s.syncs;
  for (const auto& f : s.files) r.file_datasyncs += f->datasyncs();
  r.last_io_error = s.io->last_error();
  r.epoch = s.log ? s.log->epoch() : m.recovery.epoch;
  r.epochs_committed = s.epochs;
  r.log_bytes_written = s.log ? s.log->bytes_written() : 0;
  r.log_bytes_applied = s.log ? s.log->bytes_applied() : 0;
  return r;
}

const epoch_recovery& mapping::last_recovery() const { return self().recovery; }

const std::string& mapping::path() const { return self().paths.front(); }
const std::vector<std::string>& mapping::paths() const { return self().paths; }
std::uint64_t mapping::size() const { return self().size; }
std::uint64_t mapping::offset() const { return self().offset; }
const mapping_options& mapping::options() const { return self().options; }
std::uint64_t mapping::gpu_cache_lines() const { return self().capacity; }
std::uint64_t mapping::host_cache_lines() const { return self().host_lines; }
bool mapping::resident() const { return self().state().view.resident; }
bool mapping::direct_io() const {
  const live_state& s = self().state();
  return !s.files.empty() && self().line_bytes() % kDirectAlign == 0 &&
         std::all_of(s.files.begin(), s.files.end(), [](const auto& f) { return f->direct(); });
}

}  // namespace gpm::ooc
