// Fuzzing a pool's metadata: random bit flips anywhere in the header, root records and
// directory, truncation at random lengths, and damage to the files of its snapshot. Opening must
// either refuse the pool with a gpm::error (never crash, never hang) or, when the damage is in
// redundancy it can do without (one root record slot), open it with every object intact. Also
// random allocation sizes over all of 64 bits. Iterations: GPMKIT_FUZZ_ITERATIONS.
#include <gpm/pool/format.hpp>
#include <gpm/pool/pool.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

namespace fmt = gpm::format::pool;
constexpr std::uint64_t kPoolBytes = 1 << 20;

int iterations() {
  const char* v = std::getenv("GPMKIT_FUZZ_ITERATIONS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 400;
}

struct object_summary {
  std::string name;
  std::uint64_t offset, bytes;
  bool operator==(const object_summary&) const = default;
};

class PoolFuzz : public ::testing::Test {
 protected:
  PoolFuzz() : dirs_("fuzz") {
    options_.pm_dir = dirs_.pm_dir();
    options_.snapshot_dir = dirs_.snapshot_dir();
    options_.restore_from_snapshot = false;
    options_.notice = [](const std::string&) {};
    gpm::pool p = gpm::pool::create("f.pool", kPoolBytes, "fuzz", options_);
    for (int i = 0; i < 9; ++i) {
      const std::uint64_t off = p.allocate("object-" + std::to_string(i), 1000 * (i + 1));
      std::memset(p.host_ptr<char>(off), i + 1, 1000 * (i + 1));
    }
    p.free("object-4");
    heap_offset_ = fmt::kDirectoryOffset + fmt::directory_bytes(options_.directory_capacity);
    original_ = summary(p);
    p.close();
    std::ifstream in(path(), std::ios::binary);
    image_.assign(std::istreambuf_iterator<char>(in), {});
  }

  std::string path() const { return dirs_.pool_path("f.pool"); }

  static std::vector<object_summary> summary(const gpm::pool& p) {
    std::vector<object_summary> out;
    for (const auto& o : p.objects()) out.push_back({o.name, o.offset, o.bytes});
    return out;
  }

  void write(const std::vector<char>& bytes) const {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  // Opens the damaged pool. Returns true if it opened (and checks it), false if it was refused.
  bool try_open(const std::string& what) {
    try {
      gpm::pool p = gpm::pool::open("f.pool", "fuzz", options_);
      EXPECT_EQ(summary(p), original_) << what << ": opened, but objects changed";
      for (const auto& o : p.objects()) {
        const char want = static_cast<char>(std::stoi(o.name.substr(7)) + 1);
        const char* data = p.host_ptr<char>(o.offset);
        for (std::uint64_t k = 0; k < o.bytes; ++k) {
          if (data[k] != want) {
            ADD_FAILURE() << what << ": object " << o.name << " damaged at byte " << k;
            break;
          }
        }
      }
      return true;
    } catch (const gpm::error& e) {
      const gpm::errc c = e.code();
      EXPECT_TRUE(c == gpm::errc::corrupt || c == gpm::errc::version ||
                  c == gpm::errc::layout_mismatch)
          << what << ": unexpected error kind " << gpm::to_string(c) << ": " << e.what();
      EXPECT_GT(std::strlen(e.what()), 20u) << what;
      return false;
    }
  }

  gpm::test::scratch_dirs dirs_;
  gpm::pool_options options_;
  std::vector<char> image_;
  std::vector<object_summary> original_;
  std::uint64_t heap_offset_ = 0;
};

TEST_F(PoolFuzz, RandomBitFlipsInMetadataAreRefusedOrHarmless) {
  std::mt19937_64 rng(gpm::test::trial_seed(1));
  int refused = 0, opened = 0;
  for (int it = 0; it < iterations(); ++it) {
    std::vector<char> bytes = image_;
    const int flips = 1 + static_cast<int>(rng() % 6);
    std::string what = "iteration " + std::to_string(it) + ", flips at";
    bool touched_header_or_live_entry = false;
    for (int f = 0; f < flips; ++f) {
      const std::uint64_t off = rng() % heap_offset_;
      const int bit = static_cast<int>(rng() % 8);
      bytes[off] = static_cast<char>(bytes[off] ^ (1 << bit));
      what += " " + std::to_string(off) + ":" + std::to_string(bit);
      touched_header_or_live_entry |= off < fmt::kRootOffset || off >= fmt::kDirectoryOffset;
    }
    if (bytes == image_) continue;  // two flips of one bit cancelled
    write(bytes);
    const bool ok = try_open(what);
    ok ? ++opened : ++refused;
    if (touched_header_or_live_entry) {
      EXPECT_FALSE(ok) << what << ": damage outside the root records must be refused";
    }
  }
  EXPECT_GT(refused, 0);
  std::printf("bit flips: %d refused, %d opened intact (root-record redundancy)\n", refused,
              opened);
}

TEST_F(PoolFuzz, TruncationAtAnyLengthIsRefused) {
  std::mt19937_64 rng(gpm::test::trial_seed(2));
  for (int it = 0; it < iterations() / 4; ++it) {
    const std::uint64_t length = rng() % kPoolBytes;
    write(std::vector<char>(image_.begin(), image_.begin() + static_cast<std::ptrdiff_t>(length)));
    EXPECT_FALSE(try_open("truncated to " + std::to_string(length)));
  }
}

TEST_F(PoolFuzz, RandomGarbageFilesAreRefused) {
  std::mt19937_64 rng(gpm::test::trial_seed(3));
  for (int it = 0; it < 20; ++it) {
    std::vector<char> bytes((1 + rng() % 64) * 4096);
    for (auto& b : bytes) b = static_cast<char>(rng());
    if (it % 2 == 0) std::memcpy(bytes.data(), fmt::kKind.magic, 8);  // right magic, wrong rest
    write(bytes);
    EXPECT_FALSE(try_open("garbage file " + std::to_string(it)));
  }
}

// Random damage to one file of the pool's snapshot (manifest, image, page table; bit flips and
// random bytes, half the time in the file's first 4 KiB), with the pool file gone as after a
// reboot: restoring must either refuse with a gpm::error and leave no pool file, or bring back the
// pool exactly as it was snapshotted.
TEST_F(PoolFuzz, RandomDamageToASnapshotIsRefusedOrRestoresThePool) {
  {
    gpm::pool p = gpm::pool::open("f.pool", "fuzz", options_);
    p.snapshot();
  }
  const std::string dir = gpm::pool::snapshot_location("f.pool", options_);
  std::vector<std::pair<std::string, std::vector<char>>> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    files.emplace_back(e.path().string(),
                       std::vector<char>(std::istreambuf_iterator<char>(in), {}));
  }
  ASSERT_GE(files.size(), 2u) << "a snapshot is a manifest and an image at least";
  const auto put = [](const std::string& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  std::filesystem::remove(path());
  gpm::pool::restore(path(), options_);  // the undamaged snapshot restores
  ASSERT_TRUE(try_open("the undamaged snapshot"));
  std::mt19937_64 rng(gpm::test::trial_seed(5));
  int refused = 0, restored = 0;
  for (int it = 0; it < iterations() / 4; ++it) {
    for (const auto& [path, bytes] : files) put(path, bytes);
    const auto& [victim, good] = files[rng() % files.size()];
    if (good.empty()) continue;
    std::vector<char> bytes = good;
    const std::uint64_t span =
        rng() % 2 == 0 ? std::min<std::size_t>(4096, good.size()) : good.size();
    std::string what = "iteration " + std::to_string(it) + ", " +
                       std::filesystem::path(victim).filename().string() + " bytes";
    for (int f = 1 + static_cast<int>(rng() % 8); f > 0; --f) {
      const std::uint64_t at = rng() % span;
      bytes[at] = rng() % 4 == 0 ? static_cast<char>(rng())
                                 : static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
      what += " " + std::to_string(at);
    }
    if (bytes == good) continue;
    put(victim, bytes);
    std::filesystem::remove(path());
    try {
      gpm::pool::restore(path(), options_);
    } catch (const gpm::error& e) {
      ++refused;
      const gpm::errc c = e.code();
      EXPECT_TRUE(c == gpm::errc::corrupt || c == gpm::errc::version ||
                  c == gpm::errc::layout_mismatch || c == gpm::errc::not_found)
          << what << ": unexpected error kind " << gpm::to_string(c) << ": " << e.what();
      EXPECT_FALSE(std::filesystem::exists(path())) << what << ": a refused restore left a pool";
      continue;
    }
    EXPECT_TRUE(try_open(what + " (restored)")) << what;
    ++restored;
  }
  EXPECT_GT(refused, 0);
  std::printf("snapshot damage: %d refused, %d restored intact\n", refused, restored);
}

// Sizes from anywhere in 64 bits (near 2^64 above all, where rounding used to wrap around) and
// every alignment: each allocation either succeeds with an extent inside the heap that overlaps
// no other object, or is refused with out_of_memory or invalid_argument; afterwards the pool
// checks and reopens with the same objects.
TEST_F(PoolFuzz, RandomAllocationSizesNeverOverlapOrBreakThePool) {
  std::mt19937_64 rng(gpm::test::trial_seed(4));
  {
    gpm::pool p = gpm::pool::open("f.pool", "fuzz", options_);
    for (int it = 0; it < iterations() / 2; ++it) {
      const int bits = static_cast<int>(rng() % 65);
      std::uint64_t bytes = bits == 64 ? rng() : rng() & ((std::uint64_t{1} << bits) - 1);
      if (rng() % 4 == 0) bytes = ~std::uint64_t{0} - rng() % 8192;
      const std::uint64_t alignment = std::uint64_t{1} << (rng() % 32);
      const std::string name = "fuzz-" + std::to_string(it);
      try {
        const std::uint64_t off = p.allocate(name, bytes, alignment);
        EXPECT_EQ(off % alignment, 0u) << name;
        EXPECT_GE(off, heap_offset_) << name;
        EXPECT_LE(bytes, kPoolBytes - off) << name;
      } catch (const gpm::error& e) {
        EXPECT_TRUE(e.code() == gpm::errc::out_of_memory || e.code() == gpm::errc::invalid_argument)
            << name << ": " << e.what();
      }
      if (rng() % 3 == 0 && p.find(name)) p.free(name);
    }
    const auto objects = p.objects();
    for (std::size_t i = 1; i < objects.size(); ++i) {
      EXPECT_LE(objects[i - 1].offset + objects[i - 1].bytes, objects[i].offset)
          << objects[i - 1].name << " overlaps " << objects[i].name;
    }
    original_ = summary(p);
  }
  EXPECT_TRUE(gpm::pool::check("f.pool", options_).ok);
  gpm::pool p = gpm::pool::open("f.pool", "fuzz", options_);
  EXPECT_EQ(summary(p), original_);
}

}  // namespace
