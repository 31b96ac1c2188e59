// gpm::ooc property tests: random element stores and loads from many warps, and whole-array line
// sweeps with tiles of 1 and 32 threads, checked against a host reference of the file, for every
// mode, with data larger than both caches (heavy eviction in both tiers), accesses concentrated on
// a few hot lines (many warps missing on the same line) and spread over all of them, and ranges
// that start unaligned and end inside a line; and with many I/O threads polling one or two queue
// slots, so that a thread stalled mid-poll sees the slot's requests move on under it; and the same
// checks on resident mappings (a GPU cache that holds them whole), in every mode.
#include <random>

#include "ooc_test_util.hpp"

namespace {

using namespace gpm::test::ooc;
using gpm::ooc::mapping;

// Sizes in lines (line_size() bytes) plus bytes; `files` > 1 stripes the mapping over them.
struct scenario {
  mode m;
  std::uint64_t files;
  std::uint64_t file_lines;
  std::uint64_t offset_lines;
  std::uint64_t offset_bytes;
  std::uint64_t size_lines;
  std::int64_t size_bytes;  // the mapped size: a multiple of 8, not necessarily of the line
  const char* name;
  std::uint32_t io_threads = 2;
  std::uint32_t queue_slots = 128;
  // A GPU cache that holds every line: the mapping is resident (loaded at map time, accessed
  // directly), and only sync's write-back moves data.
  bool resident = false;
  // The file holds only its first `held_lines` lines and half of the next; the mapping (create)
  // extends it with zeros, which the host tier serves without reading (the lines wholly past the
  // old end, without caching them either).
  std::uint64_t held_lines = ~0ull;
  std::uint64_t file() const { return lines(file_lines); }
  std::uint64_t offset() const { return lines(offset_lines) + offset_bytes; }
  std::uint64_t size() const { return lines(size_lines) + size_bytes; }
};

std::ostream& operator<<(std::ostream& os, const scenario& s) { return os << s.name; }

class OocProperty : public ::testing::TestWithParam<scenario> {
 protected:
  void SetUp() override {
    const scenario& s = GetParam();
    for (std::uint64_t k = 0; k < s.files; ++k) {
      paths_.push_back(dirs_.snapshot_dir() + "/data" + std::to_string(k));
      initial_.push_back(pattern(s.file(), 31 + k));
      const std::size_t held =
          s.held_lines == ~0ull ? s.file() : std::min(s.file(), lines(s.held_lines) + lines(1) / 2);
      std::fill(initial_.back().begin() + static_cast<std::ptrdiff_t>(held), initial_.back().end(),
                0);
      write_file(paths_.back(), {initial_.back().begin(),
                                 initial_.back().begin() + static_cast<std::ptrdiff_t>(held)});
    }
    gpm::ooc::mapping_options o;
    o.mode = s.m;
    o.create = s.held_lines != ~0ull;
    o.line_bytes = line_size();
    o.gpu_cache_bytes = s.resident ? s.size() + lines(1) : lines(64);  // 64: 256 KiB / 4 MiB
    o.host_cache_bytes = lines(256);  // 1 MiB on the emulator, 16 MiB on a GPU
    o.io_threads = s.io_threads;
    o.queue_slots = s.queue_slots;
    map_ = std::make_unique<mapping>(paths_, s.size(), s.offset(), o);
    ASSERT_EQ(map_->resident(), s.resident);
    ref_ = as<std::uint64_t>(gather(initial_, s.offset(), s.size()));
  }

  bool can_load() const { return GetParam().m != mode::write; }
  bool can_store() const { return GetParam().m != mode::read; }

  // Indices: half on three hot lines, half anywhere.
  std::vector<std::uint64_t> indices(std::size_t n, std::mt19937_64& rng, bool distinct) {
    const std::uint64_t per_line = line_size() / 8;
    const std::uint64_t hot_first = (ref_.size() / 2) / per_line * per_line;
    std::uniform_int_distribution<std::uint64_t> any(0, ref_.size() - 1);
    std::uniform_int_distribution<std::uint64_t> hot(
        hot_first, std::min(ref_.size(), hot_first + 3 * per_line) - 1);
    std::vector<std::uint64_t> v;
    std::vector<bool> taken(distinct ? ref_.size() : 0);
    while (v.size() < n) {
      std::uint64_t i = v.size() % 2 == 0 ? hot(rng) : any(rng);
      if (distinct) {
        while (taken[i]) i = any(rng);  // the hot lines fill up
        taken[i] = true;
      }
      v.push_back(i);
    }
    return v;
  }

  void check_loads(std::mt19937_64& rng) {
    const auto idx = indices(4096, rng, false);
    const auto r = load(map_->ref<std::uint64_t>(), idx);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      ASSERT_EQ(r.st[k], status::ok) << k;
      ASSERT_EQ(r.values[k], ref_[idx[k]]) << "element " << idx[k];
    }
  }

  void do_stores(std::mt19937_64& rng, std::uint64_t round) {
    const auto idx = indices(4096, rng, true);  // one store per element per kernel
    std::vector<std::uint64_t> val(idx.size());
    for (std::size_t k = 0; k < idx.size(); ++k) {
      val[k] = rng() | round;
      ref_[idx[k]] = val[k];
    }
    expect_all(store(map_->ref<std::uint64_t>(), idx, val), status::ok);
  }

  // What the files must hold now: the reference where it reaches them.
  void check_file() {
    const scenario& s = GetParam();
    auto want = initial_;
    if (s.m == mode::read_write || s.m == mode::write) {
      std::vector<unsigned char> bytes(s.size());
      std::memcpy(bytes.data(), ref_.data(), s.size());
      scatter(want, s.offset(), bytes);
    }
    for (std::size_t k = 0; k < paths_.size(); ++k) ASSERT_EQ(read_file(paths_[k]), want[k]) << k;
  }

  gpm::test::scratch_dirs dirs_{"ooc-prop"};
  std::vector<std::string> paths_;
  std::vector<std::vector<unsigned char>> initial_;
  std::vector<std::uint64_t> ref_;  // the mapped range as kernels must see it
  std::unique_ptr<mapping> map_;
};

TEST_P(OocProperty, RandomStoresAndLoadsMatchTheReference) {
  std::mt19937_64 rng(GetParam().offset() + 17 * static_cast<int>(GetParam().m));
  for (std::uint64_t round = 0; round < 3; ++round) {
    if (can_store()) {
      ASSERT_NO_FATAL_FAILURE(do_stores(rng, round));
    }
    if (can_load()) {
      ASSERT_NO_FATAL_FAILURE(check_loads(rng));
    }
    if (round == 1) {
      map_->sync();
      ASSERT_NO_FATAL_FAILURE(check_file());
    }
  }
  const auto s = map_->stats();
  EXPECT_EQ(s.gpu_io_errors, 0u) << s.last_io_error;
  if (GetParam().resident) {
    EXPECT_EQ(s.gpu_misses + s.gpu_hits, 0u);  // no access acquired a line
  } else {
    EXPECT_GT(s.gpu_misses, 64u);  // more lines than the GPU cache holds came and went
  }
  map_->unmap();
  ASSERT_NO_FATAL_FAILURE(check_file());
}

TEST_P(OocProperty, LineSweepsMatchTheReference) {
  auto a = map_->ref<std::uint64_t>();
  if (can_load()) {
    EXPECT_EQ(read_lines<32>(a).values, ref_);
  }
  if (can_store()) {
    std::vector<std::uint64_t> values(ref_.size());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = i * 0x9e3779b97f4a7c15ull;
    const gpm::ooc::access intent = can_load() ? access::read_write : access::write;
    expect_all(write_lines<1>(a, values, intent), status::ok);
    for (std::size_t i = 0; i < values.size(); ++i) {
      ref_[i] = intent == access::write ? values[i] : ref_[i] + values[i];
    }
  }
  if (can_load()) {
    EXPECT_EQ(read_lines<1>(a).values, ref_);
  }
  map_->unmap();
  ASSERT_NO_FATAL_FAILURE(check_file());
}

INSTANTIATE_TEST_SUITE_P(
    Modes, OocProperty,
    // 2048 lines: 8 MiB on the emulator (128 MiB on a GPU) through 64 + 256 cached lines.
    ::testing::Values(
        scenario{mode::read_write, 1, 2048, 0, 0, 2048, 0, "read_write"},
        scenario{mode::read, 1, 2048, 0, 0, 2048, 0, "read"},
        scenario{mode::write, 1, 2048, 0, 0, 2048, 0, "write"},
        scenario{mode::volatile_data, 1, 2048, 0, 0, 2048, 0, "volatile"},
        scenario{mode::read_write, 1, 768, 3, 20, 512, 808, "read_write_unaligned"},
        scenario{mode::read_write, 1, 2048, 0, 0, 2048, 0, "read_write_half_created", 2, 128, false,
                 1024},
        scenario{mode::write, 1, 768, 0, 1000, 512, -8, "write_unaligned"},
        scenario{mode::volatile_data, 1, 768, 0, 8, 512, 1024, "volatile_unaligned"},
        // 3 files of 300 lines hold 700 lines from their line 40 on.
        scenario{mode::read_write, 3, 300, 40, 0, 700, -64, "read_write_striped"},
        scenario{mode::write, 3, 300, 40, 0, 700, -64, "write_striped"},
        // 8 I/O threads on the 2 cores of CI poll 2 slots that serve every miss.
        scenario{mode::read_write, 1, 1024, 0, 0, 1024, 0, "read_write_busy_queue", 8, 2},
        scenario{mode::volatile_data, 1, 1024, 0, 0, 1024, 0, "volatile_busy_queue", 8, 2},
        // Resident: the unaligned and striped cases above, every mode, loaded in
        // runs by two loaders (the I/O threads) through the 256-line host cache;
        // and by eight loaders.
        scenario{mode::read_write, 1, 768, 3, 20, 512, 808, "read_write_resident", 2, 128, true},
        scenario{mode::read_write, 1, 768, 3, 20, 512, 808, "read_write_resident_eight_loaders", 8,
                 128, true},
        scenario{mode::read, 1, 768, 3, 20, 512, 808, "read_resident", 2, 128, true},
        scenario{mode::write, 1, 768, 0, 1000, 512, -8, "write_resident", 2, 128, true},
        scenario{mode::volatile_data, 1, 768, 0, 8, 512, 1024, "volatile_resident", 2, 128, true},
        scenario{mode::read_write, 3, 300, 40, 0, 700, -64, "read_write_striped_resident", 2, 128,
                 true},
        scenario{mode::write, 3, 300, 40, 0, 700, -64, "write_striped_resident", 2, 128, true}),
    [](const ::testing::TestParamInfo<scenario>& i) { return std::string(i.param.name); });

}  // namespace
