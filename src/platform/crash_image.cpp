// The crash-image checker (crash_image.hpp): the durability model of one mapped range, fed by the
// persist hooks; crash images enumerated at crash points and handed to the module's check; the
// named persist sites it disables for mutation tests.
#include <gpm/platform/crash_image.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>
#include <sstream>

#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpm::detail {

std::atomic<durability_model*> armed_durability_model{nullptr};

namespace {

constexpr std::size_t kLine = 64;
constexpr std::size_t kMaxExhaustiveLines = 20;

}  // namespace

// A file by its device and inode: what the model follows across mappings.
struct file_id {
  dev_t dev;
  ino_t ino;
  bool operator==(const file_id&) const = default;
};

struct durability_model {
  crash_image_check check;
  crash_image_options options;
  // True while crash images are checked: the check's recovery, on this thread or in kernels on
  // others, persists into and maps the image file, not the checked range, and the crash points
  // it reaches are not explored again; every hook ignores what happens meanwhile.
  std::atomic<bool> exploring{false};
  std::mutex mutex;      // guards everything below
  char* base = nullptr;  // the checked range; null before it is adopted and once unmapped
  std::size_t bytes = 0;
  bool adopts = false;          // waits for the next crash_image_mapped range
  std::optional<file_id> file;  // the adopted range's file, followed when it is mapped again
  std::vector<char> durable;    // D, the image a crash would leave
  std::vector<char> image;      // the crash image being written
  std::mt19937_64 rng;
  std::map<std::string, std::uint64_t, std::less<>> point_hits;
  crash_image_stats stats;
  std::optional<crash_image_failure> failure;

  std::size_t lines() const { return (bytes + kLine - 1) / kLine; }
  std::size_t line_bytes(std::size_t line) const { return std::min(kLine, bytes - line * kLine); }

  bool explores(std::string_view point) const {
    return options.crash_points.empty() ||
           std::find(options.crash_points.begin(), options.crash_points.end(), point) !=
               options.crash_points.end();
  }

  void write_image(const std::vector<std::size_t>& dirty, const std::vector<bool>& kept) {
    image = durable;
    for (std::size_t k = 0; k < dirty.size(); ++k) {
      if (!kept[k]) continue;
      const std::size_t at = dirty[k] * kLine;
      std::memcpy(image.data() + at, base + at, line_bytes(dirty[k]));
    }
    const int fd =
        ::open(options.image_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      throw_error(errc::io, "crash-image checker: cannot create " + options.image_path + ": " +
                                std::strerror(errno));
    }
    std::size_t done = 0;
    while (done < image.size()) {
      const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        throw_error(errc::io, "crash-image checker: cannot write " + options.image_path + ": " +
                                  std::strerror(err));
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }

  // Runs the check on the image in the file; "" when it accepts it.
  std::string run_check() {
    try {
      return check(options.image_path);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "the check threw an exception that is not a std::exception";
    }
  }

  // Checks one image; records it and returns false if the check rejects it.
  bool try_image(const std::string& point, std::uint64_t hit, const std::vector<std::size_t>& dirty,
                 const std::vector<bool>& kept) {
    write_image(dirty, kept);
    ++stats.images;
    std::string message = run_check();
    if (message.empty()) return true;
    crash_image_failure f;
    f.crash_point = point;
    f.hit = hit;
    for (std::size_t k = 0; k < dirty.size(); ++k) {
      (kept[k] ? f.kept : f.lost).push_back(dirty[k] * kLine);
    }
    f.message = std::move(message);
    failure = std::move(f);
    return false;
  }

  void explore(const char* name) {
    const std::lock_guard lock(mutex);
    if (base == nullptr || failure || !explores(name)) return;
    const std::uint64_t hit = ++point_hits[name];
    if (stats.images >= options.max_images) return;
    std::vector<std::size_t> dirty;
    for (std::size_t l = 0; l < lines(); ++l) {
      const std::size_t at = l * kLine;
      if (std::memcmp(base + at, durable.data() + at, line_bytes(l)) != 0) dirty.push_back(l);
    }
    ++stats.explorations;
    stats.most_dirty_lines = std::max(stats.most_dirty_lines, dirty.size());
    const std::string point(name);
    std::vector<bool> kept(dirty.size());
    if (dirty.size() <= options.exhaustive_lines) {
      for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << dirty.size()); ++mask) {
        if (stats.images >= options.max_images) return;
        for (std::size_t k = 0; k < dirty.size(); ++k) kept[k] = ((mask >> k) & 1) != 0;
        if (!try_image(point, hit, dirty, kept)) return;
      }
      return;
    }
    // All lost, all kept, then random subsets.
    for (std::size_t i = 0; i < options.random_images + 2; ++i) {
      if (stats.images >= options.max_images) return;
      for (std::size_t k = 0; k < dirty.size(); ++k) {
        kept[k] = i == 0 ? false : i == 1 ? true : (rng() & 1) != 0;
      }
      if (!try_image(point, hit, dirty, kept)) return;
    }
  }
};

void model_persist_range(durability_model& m, const void* p, std::size_t len) {
  if (m.exploring.load(std::memory_order_acquire) || len == 0) return;
  const std::lock_guard lock(m.mutex);
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(m.base);
  const std::uintptr_t hi = lo + m.bytes;
  if (m.base == nullptr || b >= hi || b + len <= lo) return;
  // Whole lines: a cache line reaches memory as a whole.
  const std::size_t first = (std::max(b, lo) - lo) / kLine;
  const std::size_t end = (std::min(b + len, hi) - lo + kLine - 1) / kLine;
  const std::size_t from = first * kLine, to = std::min(end * kLine, m.bytes);
  std::memcpy(m.durable.data() + from, m.base + from, to - from);
}

void model_persist_all(durability_model& m) {
  if (m.exploring.load(std::memory_order_acquire)) return;
  const std::lock_guard lock(m.mutex);
  if (m.base == nullptr) return;
  std::memcpy(m.durable.data(), m.base, m.bytes);
}

bool model_site_disabled(durability_model& m, const char* site) {
  if (m.exploring.load(std::memory_order_acquire)) return false;
  const std::lock_guard lock(m.mutex);
  ++m.stats.site_hits[site];
  return m.options.disabled_site == site;
}

void model_crash_point(durability_model& m, const char* name) {
  if (m.exploring.exchange(true, std::memory_order_acq_rel)) return;
  try {
    m.explore(name);
  } catch (...) {
    m.exploring.store(false, std::memory_order_release);
    throw;
  }
  m.exploring.store(false, std::memory_order_release);
}

}  // namespace gpm::detail

namespace gpm {

std::string crash_image_failure::describe() const {
  std::ostringstream s;
  auto list = [&s](const char* what, const std::vector<std::uint64_t>& offsets) {
    s << offsets.size() << " dirty lines " << what;
    constexpr std::size_t kShown = 16;
    for (std::size_t i = 0; i < offsets.size() && i < kShown; ++i) {
      s << (i == 0 ? " (offsets " : ", ") << "0x" << std::hex << offsets[i] << std::dec;
    }
    if (offsets.size() > kShown) s << ", ...";
    if (!offsets.empty()) s << ")";
  };
  s << "crash point " << crash_point << " (hit " << hit << "): the image with ";
  list("lost", lost);
  s << " and ";
  list("kept", kept);
  s << " fails: " << message;
  return s.str();
}

crash_image_checker::crash_image_checker(crash_image_check check, crash_image_options options) {
  arm(std::move(check), std::move(options), true);
}

crash_image_checker::crash_image_checker(void* base, std::size_t bytes, crash_image_check check,
                                         crash_image_options options) {
  require(base != nullptr && bytes > 0, "crash-image checker: the range to check is empty");
  arm(std::move(check), std::move(options), false);
  detail::durability_model& m = *model_;
  const std::lock_guard lock(m.mutex);
  m.base = static_cast<char*>(base);
  m.bytes = bytes;
  // What the range holds when the checker is armed counts as durable.
  m.durable.assign(m.base, m.base + bytes);
}

void crash_image_checker::arm(crash_image_check check, crash_image_options options, bool adopts) {
  require(static_cast<bool>(check), "crash-image checker: no check was given");
  require(!options.image_path.empty(), "crash-image checker: no image path was given");
  require(options.exhaustive_lines <= detail::kMaxExhaustiveLines,
          "crash-image checker: exhaustive_lines is " + std::to_string(options.exhaustive_lines) +
              "; at most " + std::to_string(detail::kMaxExhaustiveLines) +
              " are allowed (2^n images per crash point)");
  model_ = std::make_unique<detail::durability_model>();
  model_->check = std::move(check);
  model_->rng.seed(options.seed);
  model_->options = std::move(options);
  model_->adopts = adopts;
  detail::durability_model* none = nullptr;
  if (!detail::armed_durability_model.compare_exchange_strong(none, model_.get())) {
    throw_error(errc::busy, "a crash-image checker is armed already in this process");
  }
}

crash_image_checker::~crash_image_checker() {
  detail::durability_model* mine = model_.get();
  detail::armed_durability_model.compare_exchange_strong(mine, nullptr);
}

std::optional<crash_image_failure> crash_image_checker::failure() const {
  const std::lock_guard lock(model_->mutex);
  return model_->failure;
}

crash_image_stats crash_image_checker::stats() const {
  const std::lock_guard lock(model_->mutex);
  return model_->stats;
}

void crash_image_mapped(void* p, std::size_t bytes, int fd) {
  detail::durability_model* m = detail::armed_durability_model.load(std::memory_order_relaxed);
  if (m == nullptr || m->exploring.load(std::memory_order_acquire)) return;  // an image file
  std::optional<detail::file_id> file;
  if (struct stat st{}; fd >= 0 && ::fstat(fd, &st) == 0)
    file = detail::file_id{st.st_dev, st.st_ino};
  const std::lock_guard lock(m->mutex);
  if (m->base != nullptr) return;  // one range at a time
  if (m->adopts) {
    m->adopts = false;
    m->file = file;
    m->durable.assign(static_cast<char*>(p), static_cast<char*>(p) + bytes);
  } else if (!file || m->file != file || m->durable.size() != bytes) {
    return;
  }
  // The adopted file, or the file it follows mapped again: its durable image is what the model
  // kept, and whatever the mapping shows beyond it is still dirty.
  m->base = static_cast<char*>(p);
  m->bytes = bytes;
}

void crash_image_unmapped(const void* p) {
  detail::durability_model* m = detail::armed_durability_model.load(std::memory_order_relaxed);
  if (m == nullptr || m->exploring.load(std::memory_order_acquire)) return;  // an image file
  const std::lock_guard lock(m->mutex);
  if (m->base != p) return;
  m->base = nullptr;
  m->bytes = 0;
  if (!m->file) m->durable.clear();  // kept for a file mapped again
}

}  // namespace gpm
