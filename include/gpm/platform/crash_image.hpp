// The crash-image checker: proves that a protocol's persists are enough, which real crash tests on
// tmpfs cannot (SIGKILL keeps every store that reached the page cache, persisted or not).
//
// Armed on one mapped range (a pool's mapping, or the next one the pool layer maps, from the
// moment it is mapped: a pool being created or recovered), it keeps a durability model of it:
//   V  the mapping itself (what the program sees),
//   D  a private copy (what a crash would leave), taken when the checker is armed.
// gpm::persist(p, len) (and gpm::write_back) copies the 64-byte lines covering [p, p + len) from V
// to D; gpm::persist() with no range makes every line where V and D differ durable (an
// over-approximation: on a GPU it orders only the calling thread's stores). At the crash points
// it is told to explore (gpm::crash_point names), instead of dying, it enumerates crash images:
// D plus any subset of the dirty lines (V != D), every subset when there are few, else seeded
// random subsets plus "all lost" and "all kept". Each image is written to a file and handed to a
// check, the module's recovery and invariant; the first image the check rejects is reported with
// its crash point and the lines it lost and kept.
//
// gpm::persist_at(site, p, len) names a persist site of a protocol; the checker can disable one
// site (options.disabled_site) to show that a test catches its removal (mutation testing).
//
// An image that cannot be written throws errc::io from the crash point.
//
// Model limits: a line holds its last persisted value or its current one, never an intermediate
// store; persists order nothing across threads beyond the lines they name. Arm and disarm while
// no other thread persists into the range; while images are checked (inside a crash point), the
// hooks ignore every thread, so the check's recovery may run kernels. Unarmed, every hook costs
// one relaxed load. Host code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpm {

struct crash_image_options {
  std::string image_path;                 // the file each crash image is written to
  std::vector<std::string> crash_points;  // the crash points to explore at (empty: all of them)
  std::size_t exhaustive_lines = 8;       // at most this many dirty lines: every subset (<= 20)
  std::size_t random_images = 8;          // more: this many random subsets, plus all lost and kept
  std::size_t max_images = 100000;        // the budget: no exploration after this many images
  std::uint64_t seed = 1;                 // of the random subsets
  std::string disabled_site;              // mutation: this persist_at site does nothing
};

// The first crash image the check rejected.
struct crash_image_failure {
  std::string crash_point;
  std::uint64_t hit = 0;            // the n-th time the crash point was reached (from 1)
  std::vector<std::uint64_t> lost;  // offsets in the range of the dirty lines the image lost
  std::vector<std::uint64_t> kept;  // and of those it kept
  std::string message;              // what the check said (or the exception it threw)
  std::string describe() const;
};

struct crash_image_stats {
  std::uint64_t explorations = 0;  // crash point hits explored
  std::uint64_t images = 0;        // images checked
  std::size_t most_dirty_lines = 0;
  std::map<std::string, std::uint64_t> site_hits;  // persist_at sites reached while armed
};

// The module's recovery and invariant on the image file: returns "" when it is consistent, else
// what is wrong. An exception it throws counts as a rejection with its message. It runs inside the
// crash point, on the thread that reached it, and must not call the checker.
using crash_image_check = std::function<std::string(const std::string& image_path)>;

namespace detail {
struct durability_model;
// gpm::crash_point's hook: explores crash images if the checker is told to at `name`.
void model_crash_point(durability_model& m, const char* name);
}  // namespace detail

class crash_image_checker {
 public:
  // Arms the checker on [base, base + bytes). One checker at a time (errc::busy otherwise);
  // errc::invalid_argument for an empty range, a missing check or image path, or more than 20
  // exhaustive lines.
  crash_image_checker(void* base, std::size_t bytes, crash_image_check check,
                      crash_image_options options);
  // Arms the checker on the next range a layer reports with crash_image_mapped (pool::create and
  // pool::open report their mapping as soon as it exists): its content then counts as durable,
  // and the checker follows its file across later mappings.
  crash_image_checker(crash_image_check check, crash_image_options options);
  ~crash_image_checker();  // disarms
  crash_image_checker(const crash_image_checker&) = delete;
  crash_image_checker& operator=(const crash_image_checker&) = delete;

  // The first rejected image, if any; exploration stops at it.
  std::optional<crash_image_failure> failure() const;
  crash_image_stats stats() const;

 private:
  // Validates, builds the model and publishes it to the hooks (with no range yet).
  void arm(crash_image_check check, crash_image_options options, bool adopts);

  std::unique_ptr<detail::durability_model> model_;
};

// For layers that map persistent files (the pool): an armed checker that waits for a range
// adopts [p, p + bytes), the mapping of file descriptor `fd`; one that checks a range stops when
// it is unmapped, and takes it up again when the file it adopted (the same device and inode,
// e.g. a pool closed and opened again, or a restored pool once published) is mapped again with
// the same size, its durable image unchanged. Unarmed, each costs one relaxed load.
void crash_image_mapped(void* p, std::size_t bytes, int fd = -1);
void crash_image_unmapped(const void* p);

}  // namespace gpm
