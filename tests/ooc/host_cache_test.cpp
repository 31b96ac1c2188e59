// Unit tests of the host tier of gpm::ooc (src/ooc/host_cache.hpp) without kernels: how its pinned
// memory grows (a stream stays in one segment, data read again grows the cache to its cap), and
// what a staged (crash-consistent) mode::write cache hands to the epoch log. Each epoch's records,
// applied to a copy of the file as epoch_log::apply writes them, must give exactly the file's
// previous bytes with every byte stored since overwritten, however the entries went to the spill
// file and back meanwhile, and while several threads store and evict at once, as the I/O threads
// do. Write-behind of dirty lines (runs, rewrites stopping it, mode::write masks). And the pool of
// pinned staging buffers that resident mappings share (staging.hpp), and the per-disk admission of
// background reads and writes (disk_gate.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gpm/ooc/detail/file.hpp>

#include "crash_harness.hpp"
#include "disk_gate.hpp"
#include "host_cache.hpp"
#include "staging.hpp"

namespace {

using namespace gpm::detail::ooc;

constexpr std::uint64_t kLineBytes = 4096;
constexpr std::uint32_t kMaskWords = kLineBytes / kMaskGranule / 32;
constexpr std::uint32_t kGranules = kLineBytes / kMaskGranule;

std::string make_file(const gpm::test::scratch_dirs& dirs, std::uint64_t bytes) {
  const std::string path = dirs.pm_dir() + "/data.bin";
  std::vector<char> v(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(i * 131 + 7);
  std::ofstream(path, std::ios::binary).write(v.data(), static_cast<std::streamsize>(bytes));
  return path;
}

// A staged mode::write host cache of `entries` lines over a file of `lines` lines; `file` stands
// for the data file (the cache reads the real one only to fill, which mode::write never does) and
// `expect` for what it must hold after the next epoch.
struct staged_cache {
  staged_cache(std::uint64_t lines, std::uint64_t entries)
      : lines(lines),
        path(make_file(dirs, lines * kLineBytes)),
        data(path, lines * kLineBytes, 0, true, false, false),
        spill(backing_file::temporary(dirs.pm_dir())),
        cache(
            host_cache_config{gpm::ooc::mode::write, kLineBytes, lines * kLineBytes, entries, true},
            {&data}, &spill) {
    std::ifstream in(path, std::ios::binary);
    file.resize(lines * kLineBytes);
    in.read(reinterpret_cast<char*>(file.data()), static_cast<std::streamsize>(file.size()));
    expect = file;
  }

  // What a line leaving the GPU brings: the 4-byte value v at granule g of `line`, or, with
  // `whole`, v in every granule. Threads may call this at once for different lines.
  void store(std::uint64_t line, std::uint32_t g, std::uint32_t v, bool whole = false) {
    std::vector<std::byte> src(kLineBytes);
    std::vector<std::uint32_t> mask(kMaskWords, 0);
    for (std::uint32_t k = 0; k < kGranules; ++k) {
      if (!whole && k != g) continue;
      std::memcpy(src.data() + k * kMaskGranule, &v, 4);
      std::memcpy(expect.data() + line * kLineBytes + k * kMaskGranule, &v, 4);
    }
    mask[g / 32] = 1u << (g % 32);
    const std::uint32_t e = cache.pin(line, host_cache::purpose::store);
    cache.store(e, src.data(), whole ? nullptr : mask.data());
    cache.unpin(e);
  }

  // Writes the epoch's records into `file` as epoch_log::apply does, and ends the epoch.
  void commit() {
    cache.log_epoch(
        0, lines - 1,
        [](void* ctx, std::uint64_t line, const std::byte* bytes, std::uint64_t valid,
           const std::uint32_t* mask, std::uint32_t mask_words, std::uint64_t) {
          std::byte* dst = static_cast<staged_cache*>(ctx)->file.data() + line * kLineBytes;
          if (mask == nullptr) {
            std::memcpy(dst, bytes, valid);
            return;
          }
          for_each_run(mask, mask_words, [&](std::uint32_t b, std::uint32_t end) {
            std::memcpy(dst + b * kMaskGranule, bytes + b * kMaskGranule, (end - b) * kMaskGranule);
          });
        },
        this);
    cache.finish_epoch(0, lines - 1);
  }

  // The first byte where `file` and `expect` differ, as "line L byte B", or "" if none.
  std::string first_difference() const {
    for (std::uint64_t i = 0; i < file.size(); ++i) {
      if (file[i] != expect[i]) {
        return "line " + std::to_string(i / kLineBytes) + " byte " + std::to_string(i % kLineBytes);
      }
    }
    return "";
  }

  gpm::test::scratch_dirs dirs{"ooc-host-cache"};
  std::uint64_t lines;
  std::string path;
  backing_file data;
  backing_file spill;
  host_cache cache;
  std::vector<std::byte> file;
  std::vector<std::byte> expect;
};

// A cache of `cap` entries pinned 4 lines at a time over a file of 64 lines.
struct growing_cache {
  explicit growing_cache(gpm::ooc::mode m, std::uint64_t cap = 16)
      : path(make_file(dirs, kLines * kLineBytes)),
        data(path, kLines * kLineBytes, 0, m != gpm::ooc::mode::read, false, false),
        spill(backing_file::temporary(dirs.pm_dir())),
        cache(host_cache_config{m, kLineBytes, kLines * kLineBytes, cap, false, 4 * kLineBytes},
              {&data}, m == gpm::ooc::mode::volatile_data ? &spill : nullptr) {}

  // Fetches lines [first, last) in order, as a stream of GPU misses does, checking their bytes.
  void fetch(std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t line = first; line < last; ++line) {
      const std::uint32_t e = cache.pin(line, host_cache::purpose::fetch);
      const auto* b = reinterpret_cast<const unsigned char*>(cache.data(e));
      for (std::uint64_t i = 0; i < kLineBytes; i += 509) {
        ASSERT_EQ(b[i], static_cast<unsigned char>((line * kLineBytes + i) * 131 + 7)) << line;
      }
      cache.unpin(e);
    }
  }
  std::uint64_t lines_read() const { return cache.counters().file_bytes_read.load() / kLineBytes; }

  static constexpr std::uint64_t kLines = 64;
  gpm::test::scratch_dirs dirs{"ooc-host-cache"};
  std::string path;
  backing_file data;
  backing_file spill;
  host_cache cache;
};

TEST(OocHostCache, AStreamReusesTheLinesItUsedInsteadOfPinningMore) {
  growing_cache c(gpm::ooc::mode::read);
  EXPECT_EQ(c.cache.allocated_entries(), 4u);  // the first segment, at construction
  c.fetch(0, 64);
  EXPECT_EQ(c.lines_read(), 64u);
  EXPECT_EQ(c.cache.allocated_entries(), 4u);
}

TEST(OocHostCache, LinesReadAgainGrowTheCacheToItsCap) {
  growing_cache c(gpm::ooc::mode::read);
  c.fetch(0, 16);  // a stream: one segment
  EXPECT_EQ(c.cache.allocated_entries(), 4u);
  c.fetch(0, 16);  // line 0 comes back: from here on the cache grows before it evicts
  EXPECT_EQ(c.cache.allocated_entries(), 16u);
  const std::uint64_t read = c.lines_read();
  c.fetch(0, 16);  // now the cache holds all 16 lines
  EXPECT_EQ(c.lines_read(), read);
  EXPECT_EQ(c.cache.allocated_entries(), 16u);  // never past the cap
  c.fetch(16, 64);
  EXPECT_EQ(c.cache.allocated_entries(), 16u);
}

// Read-ahead of a run of lines reads those not present with one vectored read per stretch of
// them, into entries that need not be contiguous, and every line then holds its own bytes; a
// line already present splits the run and is not read again; the run stops at the cache's cap.
TEST(OocHostCache, ReadAheadOfARunReadsEachMissingLineOnceIntoItsOwnEntry) {
  growing_cache c(gpm::ooc::mode::read);
  c.fetch(5, 6);  // present before the read-ahead
  const std::uint64_t before = c.lines_read();
  c.cache.read_ahead(2, 9);  // lines 2..10: 5 is there, so two stretches, 3 + 5 lines
  EXPECT_EQ(c.lines_read() - before, 8u);
  EXPECT_EQ(c.cache.counters().read_ahead_lines.load(), 8u);
  // Each line's bytes are its own and none read ahead is read again (line 5, used and clean,
  // may have made room for the run, as the clock allows, and then is read again).
  c.fetch(2, 11);
  EXPECT_EQ(c.cache.counters().read_ahead_hits.load(), 8u);
  EXPECT_LE(c.lines_read() - before, 9u);
  // A run longer than the cap's free room stops where read-ahead would have to evict unused
  // read-ahead lines: at most the cap's 16 entries are ever held.
  c.cache.read_ahead(20, 40);
  EXPECT_LE(c.cache.allocated_entries(), 16u);
  c.fetch(20, 60);
}

// A dirty victim goes back with the dirty lines after it in one write, as far as a line that is in
// use (pinned); every line written holds its own bytes in the file, and none is written twice:
// the lines written with the victim are clean from then on.
TEST(OocHostCache, DirtyLinesAfterAVictimGoBackWithItInOneWrite) {
  gpm::test::scratch_dirs dirs{"ooc-host-cache-runs"};
  constexpr std::uint64_t kLines = 64, kCap = 16;
  const std::string path = make_file(dirs, kLines * kLineBytes);
  backing_file data(path, kLines * kLineBytes, 0, true, false, false);
  // One segment of 16 entries, pinned at construction: entry e takes line e below.
  host_cache cache(host_cache_config{gpm::ooc::mode::read_write, kLineBytes, kLines * kLineBytes,
                                     kCap, false, kCap * kLineBytes},
                   {&data}, nullptr);
  const auto stored = [](std::uint64_t line, std::uint64_t i) {
    return static_cast<unsigned char>(line * 7 + i % 251 + 1);
  };
  for (std::uint64_t line = 0; line < kCap; ++line) {  // every entry dirty, whole
    const std::uint32_t e = cache.pin(line, host_cache::purpose::store);
    for (std::uint64_t i = 0; i < kLineBytes; ++i) {
      cache.data(e)[i] = static_cast<std::byte>(stored(line, i));
    }
    cache.store(e, nullptr, nullptr);
    cache.unpin(e);
  }
  const auto& k = cache.counters();
  ASSERT_EQ(k.file_writes.load(), 0u);
  const std::uint32_t in_use = cache.pin(8, host_cache::purpose::fetch);  // a hit; ends a run
  // Room for line 20: the clock takes line 0 (the second sweep's first unreferenced entry), dirty,
  // so lines 0-7 go back in one write, then line 0's entry (clean now) takes line 20.
  cache.unpin(cache.pin(20, host_cache::purpose::fetch));
  EXPECT_EQ(k.file_writes.load(), 1u);
  EXPECT_EQ(k.file_bytes_written.load(), 8 * kLineBytes);
  cache.unpin(in_use);
  cache.write_back(0, kLines - 1);  // lines 8-15, in one write; 1-7 are clean
  EXPECT_EQ(k.file_writes.load(), 2u);
  EXPECT_EQ(k.file_bytes_written.load(), 16 * kLineBytes);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> file(kCap * kLineBytes);
  in.read(file.data(), static_cast<std::streamsize>(file.size()));
  for (std::uint64_t line = 0; line < kCap; ++line) {
    for (std::uint64_t i = 0; i < kLineBytes; i += 97) {
      ASSERT_EQ(static_cast<unsigned char>(file[line * kLineBytes + i]), stored(line, i))
          << "line " << line << " byte " << i;
    }
  }
}

// A read_write cache with write-behind on, 16 entries over a file of 64 lines, and what its
// lines' stores put there.
struct behind_cache {
  explicit behind_cache(gpm::ooc::mode m = gpm::ooc::mode::read_write, bool on = true)
      : path(make_file(dirs, kLines * kLineBytes)),
        data(path, kLines * kLineBytes, 0, true, false, false),
        cache(host_cache_config{m, kLineBytes, kLines * kLineBytes, kCap, false, kCap * kLineBytes,
                                true, on},
              {&data}, nullptr) {}

  static unsigned char stored(std::uint64_t line, std::uint64_t i, unsigned round) {
    return static_cast<unsigned char>(line * 7 + i % 251 + round * 13 + 1);
  }
  // A whole line leaving the GPU in round `round`.
  void store(std::uint64_t line, unsigned round = 0) {
    const std::uint32_t e = cache.pin(line, host_cache::purpose::store);
    for (std::uint64_t i = 0; i < kLineBytes; ++i) {
      cache.data(e)[i] = static_cast<std::byte>(stored(line, i, round));
    }
    cache.store(e, nullptr, nullptr);
    cache.unpin(e);
  }
  // Whether the file holds round `round`'s bytes of `line`.
  bool in_file(std::uint64_t line, unsigned round) const {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> b(kLineBytes);
    in.seekg(static_cast<std::streamoff>(line * kLineBytes));
    in.read(b.data(), static_cast<std::streamsize>(kLineBytes));
    for (std::uint64_t i = 0; i < kLineBytes; i += 97) {
      if (static_cast<unsigned char>(b[i]) != stored(line, i, round)) return false;
    }
    return true;
  }

  static constexpr std::uint64_t kLines = 64, kCap = 16;  // runs of 4 lines (a quarter of 16)
  gpm::test::scratch_dirs dirs{"ooc-host-cache-behind"};
  std::string path;
  backing_file data;
  host_cache cache;
};

// Write-behind writes runs of dirty lines nobody uses, lowest first, each run in one write, and
// waits while the idle dirty lines form no run of a quarter of the cap; a line in use splits runs
// and, once unpinned, joins the next one. sync's write-back then finds nothing left to write.
TEST(OocHostCache, WriteBehindWritesRunsOfIdleDirtyLinesBeforeSync) {
  behind_cache c;
  const auto& k = c.cache.counters();
  EXPECT_FALSE(c.cache.write_behind_wanted()) << "nothing stored yet";
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line);
  const std::uint32_t in_use = c.cache.pin(3, host_cache::purpose::fetch);
  ASSERT_TRUE(c.cache.write_behind_wanted());
  ASSERT_TRUE(c.cache.write_behind());  // lines 0-2 are too few: 4-7
  EXPECT_EQ(k.file_writes.load(), 1u);
  EXPECT_EQ(k.write_behind_lines.load(), 4u);
  for (std::uint64_t line = 4; line < 8; ++line) EXPECT_TRUE(c.in_file(line, 0)) << line;
  EXPECT_FALSE(c.in_file(0, 0));
  EXPECT_FALSE(c.cache.write_behind()) << "lines 0-2 alone are no run";
  EXPECT_FALSE(c.cache.write_behind_wanted()) << "it looked and nothing was stored since";
  c.cache.unpin(in_use);
  ASSERT_TRUE(c.cache.write_behind_wanted()) << "the unpinned dirty line joins a run";
  ASSERT_TRUE(c.cache.write_behind());
  EXPECT_EQ(k.file_writes.load(), 2u);
  EXPECT_EQ(k.write_behind_lines.load(), 8u);
  c.cache.write_back(0, behind_cache::kLines - 1);
  EXPECT_EQ(k.file_writes.load(), 2u) << "sync found lines written behind still dirty";
  for (std::uint64_t line = 0; line < 8; ++line) EXPECT_TRUE(c.in_file(line, 0)) << line;
}

// A fetch of a line while write-behind writes it reads the entry at once: the write only reads
// the bytes too. 1 MiB lines, so that a run's write (16 lines) lasts long enough to be caught;
// each try takes a fresh cache, as the write may end before the fetch begins.
TEST(OocHostCache, AFetchReadsALineWhileItIsWrittenBehind) {
  constexpr std::uint64_t kLine = 1 << 20, kLines = 16;
  gpm::test::scratch_dirs dirs{"ooc-host-cache-writing"};
  const std::string path = make_file(dirs, kLines * kLine);
  bool caught = false;
  for (int attempt = 0; attempt < 50 && !caught; ++attempt) {
    backing_file data(path, kLines * kLine, 0, true, false, false);
    host_cache cache(host_cache_config{gpm::ooc::mode::read_write, kLine, kLines * kLine, kLines,
                                       false, kLines * kLine, true, true},
                     {&data}, nullptr);
    const auto value = static_cast<std::byte>(attempt + 1);
    for (std::uint64_t line = 0; line < kLines; ++line) {
      const std::uint32_t e = cache.pin(line, host_cache::purpose::store);
      std::memset(cache.data(e), static_cast<int>(value), kLine);
      cache.store(e, nullptr, nullptr);
      cache.unpin(e);
    }
    std::atomic<bool> done{false};
    std::thread writer([&] {
      EXPECT_TRUE(cache.write_behind());
      done = true;
    });
    while (!done && !cache.writing(0)) std::this_thread::yield();
    if (!done) {
      const std::uint32_t e = cache.pin(0, host_cache::purpose::fetch);
      caught = cache.writing(0);  // still being written: the fetch did not wait for it
      EXPECT_EQ(cache.data(e)[kLine - 1], value);
      cache.unpin(e);
    }
    writer.join();
    EXPECT_EQ(cache.counters().write_behind_lines.load(), kLines);
    EXPECT_FALSE(cache.writing(0));
  }
  EXPECT_TRUE(caught) << "every fetch of a line being written behind waited for the write";
}

// Data rewritten in place pass after pass: once a quarter of the lines written behind (at least
// four) come back dirty, write-behind stops and leaves their newest bytes to sync, which writes
// them once. A line stored again before it was written behind does not count.
TEST(OocHostCache, WriteBehindStopsForDataStoredAgainAndAgain) {
  behind_cache c;
  const auto& k = c.cache.counters();
  for (std::uint64_t line = 0; line < 4; ++line) c.store(line);
  c.store(0, 1);  // again, before any write: no rewrite
  ASSERT_TRUE(c.cache.write_behind());
  EXPECT_TRUE(c.in_file(0, 1));
  for (std::uint64_t line = 0; line < 4; ++line) c.store(line, 2);  // 4 rewrites of 4 written
  EXPECT_FALSE(c.cache.write_behind());
  EXPECT_FALSE(c.cache.write_behind_wanted());
  for (std::uint64_t line = 4; line < 12; ++line) c.store(line, 2);
  EXPECT_FALSE(c.cache.write_behind()) << "stopped for good";
  EXPECT_EQ(k.write_behind_lines.load(), 4u);
  c.cache.write_back(0, behind_cache::kLines - 1);
  for (std::uint64_t line = 0; line < 12; ++line) EXPECT_TRUE(c.in_file(line, 2)) << line;
}

// Off in the config (volatile data, crash-consistent and resident mappings, or
// mapping_options::write_behind false): never writes; dirty lines wait for sync.
TEST(OocHostCache, WriteBehindOffWritesNothing) {
  behind_cache c(gpm::ooc::mode::read_write, false);
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line);
  EXPECT_FALSE(c.cache.write_behind_wanted());
  EXPECT_FALSE(c.cache.write_behind());
  EXPECT_EQ(c.cache.counters().file_writes.load(), 0u);
}

// mode::write: a line goes back alone with only the bytes stored (its mask), whatever the run.
TEST(OocHostCache, WriteBehindOfAWriteModeLineWritesOnlyItsStoredBytes) {
  behind_cache c(gpm::ooc::mode::write);
  const std::uint32_t e = c.cache.pin(5, host_cache::purpose::store);
  std::vector<std::byte> src(kLineBytes, std::byte{0xab});
  std::vector<std::uint32_t> mask(kMaskWords, 0);
  mask[0] = 0x6u;  // granules 1 and 2: bytes 4-11
  c.cache.store(e, src.data(), mask.data());
  c.cache.unpin(e);
  ASSERT_TRUE(c.cache.write_behind());
  EXPECT_EQ(c.cache.counters().file_bytes_written.load(), 8u);
  std::ifstream in(c.path, std::ios::binary);
  std::vector<char> b(kLineBytes);
  in.seekg(static_cast<std::streamoff>(5 * kLineBytes));
  in.read(b.data(), static_cast<std::streamsize>(kLineBytes));
  for (std::uint64_t i = 0; i < 16; ++i) {
    const auto was = static_cast<unsigned char>((5 * kLineBytes + i) * 131 + 7);
    EXPECT_EQ(static_cast<unsigned char>(b[i]), i >= 4 && i < 12 ? 0xab : was) << i;
  }
}

// Lines past what the file held before create extended it are zeros that are never read (a fresh
// output file mapped read_write read every line from its holes): the line that straddles the old
// end is read up to it, by single misses and by read-ahead runs; a line wholly past it takes no
// entry (pin answers kZeros, read-ahead leaves it out). Once a line is written back it is data,
// and a cache that fetches it then reads it.
TEST(OocHostCache, LinesPastWhatTheFileHeldAreZerosWithoutARead) {
  gpm::test::scratch_dirs dirs{"ooc-host-cache-held"};
  constexpr std::uint64_t kLines = 16;
  const std::uint64_t held = 2 * kLineBytes + 100;  // lines 0-1 and 100 bytes of line 2
  const std::string path = make_file(dirs, held);
  backing_file data(path, kLines * kLineBytes, 0, true, true, false);
  ASSERT_EQ(data.held(), held);
  const auto make = [&] {
    return host_cache(
        host_cache_config{gpm::ooc::mode::read_write, kLineBytes, kLines * kLineBytes, 8}, {&data},
        nullptr);
  };
  const auto expect_line = [&](host_cache& cache, std::uint64_t line, const char* why) {
    const std::uint32_t e = cache.pin(line, host_cache::purpose::fetch);
    if (line * kLineBytes >= held) {  // zeros: no entry, nothing to unpin
      EXPECT_EQ(e, host_cache::kZeros) << why << ": line " << line;
      return;
    }
    ASSERT_NE(e, host_cache::kZeros) << why << ": line " << line;
    const auto* b = reinterpret_cast<const unsigned char*>(cache.data(e));
    for (std::uint64_t i = 0; i < kLineBytes; ++i) {
      const std::uint64_t at = line * kLineBytes + i;
      const auto want = at < held ? static_cast<unsigned char>(at * 131 + 7) : 0;
      ASSERT_EQ(b[i], want) << why << ": line " << line << ", byte " << i;
    }
    cache.unpin(e);
  };
  host_cache cache = make();
  cache.read_ahead(1, 4);  // lines 1-4: 1 whole, 100 bytes of 2; 3 and 4 are zeros, left out
  EXPECT_EQ(cache.counters().file_bytes_read.load(), kLineBytes + 100);
  EXPECT_EQ(cache.counters().read_ahead_lines.load(), 2u);
  for (std::uint64_t line = 1; line < 5; ++line) expect_line(cache, line, "read ahead");
  expect_line(cache, 0, "a miss below the old end");
  expect_line(cache, 9, "a miss past it");
  EXPECT_EQ(cache.counters().file_bytes_read.load(), 2 * kLineBytes + 100);

  // Line 12 leaves the GPU and is written back: from then on it is data.
  std::vector<std::byte> line12(kLineBytes);
  for (std::uint64_t i = 0; i < kLineBytes; ++i) line12[i] = static_cast<std::byte>(i * 7 + 3);
  const std::uint32_t e = cache.pin(12, host_cache::purpose::store);
  cache.store(e, line12.data(), nullptr);
  cache.unpin(e);
  cache.write_back(12, 12);
  EXPECT_EQ(data.held(), 13 * kLineBytes);
  host_cache again = make();  // a cache without the line: it must come from the file
  const std::uint32_t f = again.pin(12, host_cache::purpose::fetch);
  EXPECT_EQ(std::memcmp(again.data(f), line12.data(), kLineBytes), 0);
  again.unpin(f);
  EXPECT_EQ(again.counters().file_bytes_read.load(), kLineBytes);
}

// A host cache's pinned segments are lent by the process's pool and go back to it with the
// cache, so the next mapping's cache takes them instead of pinning its own (pinning and unpinning
// per mapping cost small mappings as much as reading their data).
TEST(OocHostCache, SegmentsAreLentByThePinnedPoolAndGoBack) {
  const std::uint64_t lent = staging_buffer::lent_bytes();
  std::uint64_t pinned = 0;
  {
    growing_cache c(gpm::ooc::mode::read);
    c.fetch(0, 16);
    c.fetch(0, 16);  // grows to its cap: 4 segments of 4 lines
    EXPECT_EQ(c.cache.allocated_entries(), 16u);
    EXPECT_GE(staging_buffer::lent_bytes(), lent + 16 * kLineBytes);
    pinned = staging_buffer::pinned_bytes();
  }
  EXPECT_EQ(staging_buffer::lent_bytes(), lent);
  growing_cache again(gpm::ooc::mode::read);
  again.fetch(0, 16);
  again.fetch(0, 16);
  EXPECT_EQ(again.cache.allocated_entries(), 16u);
  EXPECT_EQ(staging_buffer::pinned_bytes(), pinned);  // nothing pinned anew
}

TEST(OocHostCache, VolatileDataGrowsBeforeItEvicts) {
  growing_cache c(gpm::ooc::mode::volatile_data);
  c.fetch(0, 12);
  EXPECT_EQ(c.cache.allocated_entries(), 12u);
  c.fetch(0, 12);
  EXPECT_EQ(c.lines_read(), 12u);  // all still there
}

TEST(OocHostCache, EpochRecordsHoldExactlyTheBytesStoredAcrossSpills) {
  staged_cache c(8, 2);  // 8 lines through 2 entries: nearly every store spills another line
  for (std::uint32_t epoch = 1; epoch <= 3; ++epoch) {
    for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + epoch, epoch * 100 + line);
    c.store(3, 0, epoch, true);  // a whole line over the granule stored before (superseded)
    c.store(5, 9, epoch);        // a line stored again after it went to the spill file
    c.store(1, 2, epoch * 7);
    c.store(6, 40, epoch, epoch == 2);
    c.commit();
    ASSERT_EQ(c.first_difference(), "") << "epoch " << epoch;
  }
  EXPECT_GT(c.cache.counters().spill_bytes_written.load(), 0u);
}

// A committed epoch's records may name staged copies by their place in the spill file: until the
// epoch is in the file (here: a sync whose write-back failed after the commit), a line staged
// again goes to its other slot, never over the copy the epoch names, and starts there with
// nothing staged; the next epoch then carries only what was stored since.
TEST(OocHostCache, AStagedCopyAnEpochNamesStaysUntilTheEpochIsInTheFile) {
  staged_cache c(8, 2);
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + 1, 100 + line);
  struct named {
    std::uint64_t line, at;
    std::vector<std::byte> bytes;
    std::vector<std::uint32_t> mask;
  };
  std::vector<named> records;  // the staged copies the first epoch names
  std::vector<std::byte> first = c.file;
  struct ctx {
    std::vector<named>* records;
    std::vector<std::byte>* file;
  } x{&records, &first};
  c.cache.log_epoch(
      0, 7,
      [](void* p, std::uint64_t line, const std::byte* bytes, std::uint64_t valid,
         const std::uint32_t* mask, std::uint32_t mask_words, std::uint64_t staged_at) {
        auto* k = static_cast<ctx*>(p);
        ASSERT_NE(mask, nullptr) << "no store wrote a whole line";
        std::byte* dst = k->file->data() + line * kLineBytes;
        for_each_run(mask, mask_words, [&](std::uint32_t b, std::uint32_t end) {
          std::memcpy(dst + b * kMaskGranule, bytes + b * kMaskGranule, (end - b) * kMaskGranule);
        });
        if (staged_at == host_cache::kNotStaged) return;
        k->records->push_back({line, staged_at, {bytes, bytes + valid}, {mask, mask + mask_words}});
      },
      &x);
  c.cache.release_epoch(true);
  ASSERT_GE(records.size(), 4u) << "2 entries for 8 lines: most lines were staged";
  // Stored again (over the granules the epoch holds, and others), and staged again as the 2
  // entries cycle.
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + 1, 200 + line);
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + 30, 300 + line);
  std::vector<std::byte> now(kLineBytes);
  for (const named& r : records) {
    c.spill.read(r.at, now.data(), kLineBytes, kLineBytes);
    for_each_run(r.mask.data(), kMaskWords, [&](std::uint32_t b, std::uint32_t end) {
      EXPECT_EQ(std::memcmp(now.data() + b * kMaskGranule, r.bytes.data() + b * kMaskGranule,
                            (end - b) * kMaskGranule),
                0)
          << "line " << r.line << "'s copy named by the committed epoch changed";
    });
  }
  // The first epoch reaches the file (as recovery would write it), then the next one.
  c.file = first;
  c.commit();
  EXPECT_EQ(c.first_difference(), "");
}

// An epoch given up before its commit (its log could not be made durable) names nothing: a line
// staged again goes over its copy, merging with it, and the next epoch carries both stores.
TEST(OocHostCache, AnEpochGivenUpLeavesItsStagedCopiesToBeStagedOver) {
  staged_cache c(8, 2);
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + 1, 100 + line);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> named;  // line, staged_at
  c.cache.log_epoch(
      0, 7,
      [](void* p, std::uint64_t line, const std::byte*, std::uint64_t, const std::uint32_t*,
         std::uint32_t, std::uint64_t staged_at) {
        if (staged_at == host_cache::kNotStaged) return;
        static_cast<std::vector<std::pair<std::uint64_t, std::uint64_t>>*>(p)->emplace_back(
            line, staged_at);
      },
      &named);
  c.cache.release_epoch(false);
  ASSERT_GE(named.size(), 4u);
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + 1, 200 + line);
  for (std::uint64_t line = 0; line < 8; ++line) c.store(line, line + 30, 300 + line);
  std::vector<std::byte> now(kLineBytes);
  int staged_over = 0;
  for (const auto& [line, at] : named) {
    c.spill.read(at, now.data(), kLineBytes, kLineBytes);
    std::uint32_t v = 0;
    std::memcpy(&v, now.data() + (line + 30) * kMaskGranule, 4);
    staged_over += v == 300 + line;
  }
  EXPECT_GT(staged_over, 0) << "no line was staged again in its place";
  c.commit();
  EXPECT_EQ(c.first_difference(), "");
}

// The I/O threads evict into the spill file at once. Before the spill masks were kept under the
// cache's lock, their concurrent inserts lost a line's mask now and then; log_epoch then handed
// the whole staged line to the log, and bytes no kernel wrote in the epoch (zeros, older values)
// reached the file (seen once as ooc_crash_test's "not exactly epoch 3" under load; this test
// failed in 18 of 20 runs then).
TEST(OocHostCache, ConcurrentEvictionsKeepEveryStagedLinesBytes) {
  constexpr std::uint32_t kThreads = 8;
  constexpr std::uint64_t kLines = 256;
  staged_cache c(kLines, 2 * kThreads + 2);  // the fewest entries a mapping gives 8 I/O threads
  for (std::uint32_t round = 0; round < 600; ++round) {
    std::vector<std::thread> threads;
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (std::uint64_t line = t; line < kLines; line += kThreads) {
          c.store(line, static_cast<std::uint32_t>((line + round) % kGranules),
                  round * 1000003u + static_cast<std::uint32_t>(line));
        }
      });
    }
    for (auto& th : threads) th.join();
    c.commit();
    ASSERT_EQ(c.first_difference(), "") << "round " << round;
  }
}

// A staging buffer given back serves the next request it is large enough for: the pool pins
// more only for buffers lent at once, and unpins idle ones beyond kStagingKeptBytes. Idle
// buffers that earlier tests of the process gave back are lent away first (held, until the
// pool has to pin for a request), so that the test starts from a pool with none to offer.
TEST(OocStaging, BuffersGivenBackServeTheNextLoads) {
  std::vector<std::unique_ptr<staging_buffer>> idle;
  for (std::uint64_t was = 0; was != staging_buffer::pinned_bytes();) {
    was = staging_buffer::pinned_bytes();
    idle.push_back(std::make_unique<staging_buffer>(3u << 20));
  }
  const std::uint64_t before = staging_buffer::pinned_bytes();
  std::byte* first = nullptr;
  {
    const staging_buffer a(3u << 20);
    first = a.data();
    ASSERT_NE(first, nullptr);
  }
  const std::uint64_t pinned = staging_buffer::pinned_bytes();
  EXPECT_GE(pinned - before, 3u << 20);
  {
    const staging_buffer b(1u << 20);
    EXPECT_EQ(b.data(), first);
  }
  EXPECT_EQ(staging_buffer::pinned_bytes(), pinned);
  {
    const staging_buffer c(3u << 20);
    const staging_buffer d(3u << 20);
    EXPECT_NE(c.data(), d.data());
    EXPECT_GT(staging_buffer::pinned_bytes(), pinned);
  }
  idle.clear();
  {
    std::vector<std::unique_ptr<staging_buffer>> many;
    for (std::uint64_t k = 0; k < kStagingKeptBytes / (16u << 20) + 2; ++k) {
      many.push_back(std::make_unique<staging_buffer>(16u << 20));
    }
    EXPECT_GT(staging_buffer::pinned_bytes(), kStagingKeptBytes);
  }
  EXPECT_LE(staging_buffer::pinned_bytes(), kStagingKeptBytes);
}

}  // namespace

// The per-disk admission of read-ahead and write-behind (disk_gate.hpp): one place per disk, other
// disks unaffected, a refused enter gives up after its patience, and a waiting one gets the place
// once it is left.
TEST(OocDiskGate, OneBackgroundIoPerDiskAtOnce) {
  using namespace std::chrono_literals;
  static_assert(kBackgroundPerDisk == 1, "the test below takes the one place of a disk");
  disk_gate gate;
  ASSERT_TRUE(gate.enter(7, 0us));
  EXPECT_FALSE(gate.enter(7, 1ms)) << "the disk's place is taken";
  EXPECT_TRUE(gate.enter(8, 0us)) << "another disk has its own place";
  std::atomic<bool> entered{false};
  std::thread waiter([&] { entered = gate.enter(7, 10s); });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(entered.load()) << "entered while the place was still taken";
  gate.leave(7);
  waiter.join();
  EXPECT_TRUE(entered.load()) << "the waiter was not let in once the place was left";
  EXPECT_FALSE(gate.enter(7, 0us));
  gate.leave(7);
  gate.leave(8);
  EXPECT_TRUE(gate.enter(7, 0us));
  gate.leave(7);
}
