// gpm::ooc unit tests on both backends: every mode's data movement (fetch, write-back, dropped
// clean lines, write-only masks, volatile spills), element and line access and their statuses,
// create, several mappings at once, unaligned ranges, sync / prefetch / unmap / stats, read-ahead,
// and each bad input's error, disk full included.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <random>
#include <thread>

#include "ooc_test_util.hpp"

namespace {

using namespace gpm::test::ooc;
using gpm::ooc::mapping;
using gpm::ooc::mapping_options;

// A file of `n` lines of pattern bytes on the disk, its bytes before the test, and a mapping of
// all of it with `o`.
struct mapped_file {
  files f;
  std::string path;
  std::vector<unsigned char> before;
  mapping m;
  mapped_file(const std::string& name, std::uint64_t n, std::uint64_t seed,
              const mapping_options& o)
      : path(f.make(name, lines(n), seed)), before(read_file(path)), m(path, lines(n), 0, o) {}
};

// A small tmpfs of its own (needs CAP_SYS_ADMIN; mounted() says whether it could be made).
class small_tmpfs {
 public:
  small_tmpfs(const std::string& dir, std::uint64_t bytes) : dir_(dir) {
    std::filesystem::create_directories(dir);
    const std::string opts = "size=" + std::to_string(bytes);
    mounted_ = ::mount("gpm-ooc-test", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~small_tmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  bool remount(unsigned long flags, std::uint64_t bytes) const {
    const std::string opts = "size=" + std::to_string(bytes);
    return ::mount("gpm-ooc-test", dir_.c_str(), "tmpfs", MS_REMOUNT | flags, opts.c_str()) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

std::vector<std::uint32_t> numbers(std::size_t n, std::uint32_t salt) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(i * 2654435761u + salt);
  return v;
}

// ---- data movement per mode -----------------------------------------------------------------

TEST(OocMapping, ReadWriteFetchesAndWritesBack) {
  files f;
  const std::string path = f.make("rw.bin", lines(64), 1);
  auto expect = as<std::uint32_t>(read_file(path));
  {
    mapping m(path, lines(64), 0, tiny(mode::read_write));
    EXPECT_TRUE(m.direct_io());  // the disk takes O_DIRECT; lines and offset are aligned
    auto a = m.ref<std::uint32_t>();
    ASSERT_EQ(a.size(), expect.size());
    const auto r = read_lines<32>(a);
    expect_all(r.st, status::ok);
    ASSERT_EQ(r.values, expect);
    // Every third element, by element access from all lanes.
    std::vector<std::uint64_t> idx;
    std::vector<std::uint32_t> val;
    for (std::uint64_t i = 0; i < expect.size(); i += 3) {
      idx.push_back(i);
      val.push_back(static_cast<std::uint32_t>(i * 7 + 1));
      expect[i] = static_cast<std::uint32_t>(i * 7 + 1);
    }
    expect_all(store(a, idx, val), status::ok);
    const auto back = load(a, iota(expect.size()));
    expect_all(back.st, status::ok);
    ASSERT_EQ(back.values, expect);
    const auto s = m.stats();
    EXPECT_GT(s.gpu_misses, 0u);
    EXPECT_GT(s.gpu_hits, 0u);
    EXPECT_GT(s.gpu_evictions, 0u);       // 64 lines through an 8-line GPU cache
    EXPECT_GT(s.file_bytes_written, 0u);  // and a 6-line host cache
    EXPECT_GT(s.bytes_to_gpu, 0u);
    EXPECT_GT(s.bytes_from_gpu, 0u);
    EXPECT_GT(s.host_misses, 0u);
    EXPECT_EQ(s.gpu_io_errors, 0u);
    EXPECT_TRUE(s.last_io_error.empty()) << s.last_io_error;
    m.sync();
    EXPECT_EQ(as<std::uint32_t>(read_file(path)), expect);
    EXPECT_EQ(m.stats().syncs, 1u);
  }
  EXPECT_EQ(as<std::uint32_t>(read_file(path)), expect);
}

// A sync with nothing written to the file since the last fdatasync has nothing to make durable
// and makes none (unmap after an explicit sync, say); a sync after any write still makes one, as
// does the first after create extended the file. Cached and resident mappings alike.
TEST(OocMapping, SyncFdatasyncsOnlyAfterSomethingWasWritten) {
  files f;
  const std::string path = f.make("ds.bin", lines(16), 3);
  for (const bool resident : {false, true}) {
    mapping m(path, lines(16), 0, tiny(mode::read_write, resident ? 16 : 4, 6));
    ASSERT_EQ(m.resident(), resident);
    EXPECT_EQ(m.stats().resident_reads > 0, resident);  // only a resident mapping loads at map
    EXPECT_EQ(m.stats().map_load_seconds > 0, resident);
    auto a = m.ref<std::uint32_t>();
    m.sync();  // nothing stored
    EXPECT_EQ(m.stats().file_datasyncs, 0u);
    expect_all(store(a, {5}, {55u}), status::ok);
    m.sync();
    EXPECT_EQ(m.stats().file_datasyncs, 1u);
    m.sync();
    EXPECT_EQ(m.stats().file_datasyncs, 1u);
    expect_all(store(a, {lines(9) / 4}, {66u}), status::ok);
    m.sync();
    const auto s = m.stats();
    EXPECT_EQ(s.file_datasyncs, 2u);
    EXPECT_EQ(s.syncs, 4u);
  }
  auto o = tiny(mode::read_write, 4, 6);
  o.create = true;
  mapping created(f.disk("ds-new.bin"), lines(8), 0, o);
  created.sync();  // the new length
  created.sync();
  EXPECT_EQ(created.stats().file_datasyncs, 1u);
}

TEST(OocMapping, ReadModeDropsCleanLinesAndRefusesStores) {
  files f;
  const std::string path = f.make("r.bin", lines(32), 2);
  const auto before = read_file(path);
  {
    mapping m(path, before.size(), 0, tiny(mode::read));
    auto a = m.ref<std::uint64_t>();
    const auto r = read_lines<1>(a);
    expect_all(r.st, status::ok);
    EXPECT_EQ(r.values, as<std::uint64_t>(before));
    expect_all(store(a, iota(64), std::vector<std::uint64_t>(64, 9)), status::read_only);
    expect_all(write_lines<32>(a, std::vector<std::uint64_t>(a.size(), 1), access::write),
               status::read_only);
    expect_all(write_lines<32>(a, std::vector<std::uint64_t>(a.size(), 1), access::read_write),
               status::read_only);
    m.sync();  // nothing to write
    const auto s = m.stats();
    EXPECT_EQ(s.gpu_evictions, 0u);
    EXPECT_EQ(s.bytes_from_gpu, 0u);
    EXPECT_EQ(s.file_bytes_written, 0u);
    EXPECT_EQ(s.syncs, 0u);
  }
  EXPECT_EQ(read_file(path), before);
}

// The check an element load without a reference relies on (engine.cuh, peek and peek_valid),
// step by step in one thread: the directory entry gives the slot and the generation the line was
// filled at; a fill's claim of the slot (the generation raised) or a refill makes a value read
// before it invalid; an entry that names no slot is no place to read; a read that validates marks
// the line accessed.
__global__ void peek_kernel(gpm::detail::ooc::cache_view v, std::uint32_t* out) {
  namespace e = gpm::detail::ooc;
  std::uint32_t slot = 0, gen = 0;
  out[0] = e::peek(v, 1, slot, gen) ? 1 : 0;  // line 1 is in slot 0, filled at generation 2
  out[1] = slot;
  out[2] = gen;
  out[3] = e::peek_valid(v, slot, gen) ? 1 : 0;
  gpm::atomic_ref<std::uint32_t>(v.slot_gen[0]).fetch_add(1);  // a fill claims the slot
  out[4] = e::peek_valid(v, slot, gen) ? 1 : 0;
  gpm::atomic_ref<std::uint32_t>(v.slot_gen[0]).fetch_add(1);  // ... and settles it (generation 4)
  out[5] = e::peek_valid(v, slot, gen) ? 1 : 0;  // an entry read before the refill is stale
  out[6] = e::peek(v, 0, slot, gen) ? 1 : 0;     // no slot
  out[7] = e::peek(v, 3, slot, gen) ? 1 : 0;     // being filled
  out[8] = e::peek(v, 2, slot, gen) && e::peek_valid(v, slot, gen) ? 1 : 0;  // slot 1
}

TEST(OocEngine, AReadWithoutAReferenceIsValidOnlyWhileTheSlotsGenerationHolds) {
  namespace e = gpm::detail::ooc;
  gpm::device_buffer<std::uint64_t> directory(4);
  gpm::device_buffer<std::uint32_t> slot_gen(2), out(9);
  gpm::device_buffer<std::uint64_t> slot_word(2);
  const std::uint64_t dir[4] = {e::kNoSlot, e::dir_entry(0, 2), e::dir_entry(1, 6), e::kPending};
  const std::uint32_t gens[2] = {2, 6};
  const std::uint64_t words[2] = {std::uint64_t{2} << 32, std::uint64_t{3} << 32};  // tags: line+1
  directory.copy_from_host(dir, 4);
  slot_gen.copy_from_host(gens, 2);
  slot_word.copy_from_host(words, 2);
  e::cache_view v;
  v.directory = directory.data();
  v.slot_gen = slot_gen.data();
  v.slot_word = slot_word.data();
  gpm::launch(peek_kernel, 1, 1, 0, nullptr, v, out.data());
  gpm::check_cuda(cudaDeviceSynchronize(), "peek_kernel");
  const auto r = gpm::test::to_host(out);
  EXPECT_EQ(r[0], 1u);
  EXPECT_EQ(r[1], 0u);
  EXPECT_EQ(r[2], 2u);
  EXPECT_EQ(r[3], 1u) << "nothing changed: the value read is good";
  EXPECT_EQ(r[4], 0u) << "a fill claimed the slot after the read: the value may be another line's";
  EXPECT_EQ(r[5], 0u) << "the slot was filled again since the entry was read";
  EXPECT_EQ(r[6], 0u) << "an entry naming no slot";
  EXPECT_EQ(r[7], 0u) << "a line being filled";
  EXPECT_EQ(r[8], 1u);
  const auto w = gpm::test::to_host(slot_word);
  EXPECT_NE(w[0] & e::kAccessed, 0u) << "a read marks the line accessed (its second chance)";
  EXPECT_NE(w[1] & e::kAccessed, 0u);
}

// An element load takes no reference when its line is in the GPU cache: it reads the slot and
// keeps the value only if the slot's generation did not change meanwhile. With 4 GPU lines over
// 64, fills keep reusing slots that other warps are reading: every load must still return its
// own element, never bytes of the line that replaced it.
TEST(OocMapping, LoadsWithoutAReferenceNeverReturnAnotherLinesBytes) {
  files f;
  const std::string path = f.make("seq.bin", lines(64), 7);
  const auto want = as<std::uint64_t>(read_file(path));
  mapping m(path, want.size() * sizeof(std::uint64_t), 0, tiny(mode::read, 4));
  auto a = m.ref<std::uint64_t>();
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> idx(1 << 14);
  for (int round = 0; round < 4; ++round) {
    // Runs of neighbours (hits on a line while it lasts) at random places (misses elsewhere).
    for (std::size_t k = 0; k < idx.size(); ++k) {
      idx[k] = k % 64 == 0 ? rng() % a.size() : (idx[k - 1] + 1) % a.size();
    }
    const auto r = load(a, idx);
    expect_all(r.st, status::ok);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      ASSERT_EQ(r.values[k], want[idx[k]])
          << "round " << round << ", load " << k << " of element " << idx[k];
    }
  }
  EXPECT_GT(m.stats().gpu_misses, 64u);  // lines were filled again: slots were reused
}

TEST(OocMapping, WriteModeNeverFetchesAndWritesOnlyTheBytesWritten) {
  files f;
  const std::string path = f.make("w.bin", lines(32), 3);
  auto expect = as<std::uint32_t>(read_file(path));
  const std::uint32_t per_line = line_size() / 4;
  {
    mapping m(path, lines(32), 0, tiny(mode::write));
    auto a = m.ref<std::uint32_t>();
    std::vector<std::uint64_t> idx;
    std::vector<std::uint32_t> val;
    for (std::uint64_t i = 0; i < expect.size(); i += 3) {
      idx.push_back(i);
      val.push_back(static_cast<std::uint32_t>(~i));
    }
    expect_all(store(a, idx, val), status::ok);
    for (std::size_t k = 0; k < idx.size(); ++k) expect[idx[k]] = val[k];
    // Loads are refused: the lines hold only what was written.
    expect_all(load(a, iota(100)).st, status::write_only);
    expect_all(read_lines<32>(a).st, status::write_only);
    expect_all(write_lines<32>(a, std::vector<std::uint32_t>(a.size()), access::read_write),
               status::write_only);
    const auto s = m.stats();
    EXPECT_EQ(s.file_bytes_read, 0u);
    EXPECT_EQ(s.host_misses, 0u);
    EXPECT_EQ(s.host_hits, 0u);
    EXPECT_GT(s.gpu_evictions, 0u);
  }
  EXPECT_EQ(as<std::uint32_t>(read_file(path)), expect);
  // A whole-line write (access::write) replaces every element of each line.
  {
    mapping m(path, lines(32), 0, tiny(mode::write));
    auto a = m.ref<std::uint32_t>();
    const auto values = numbers(a.size(), 5);
    expect_all(write_lines<32>(a, values, access::write), status::ok);
    m.unmap();
    EXPECT_EQ(as<std::uint32_t>(read_file(path)), values);
    EXPECT_EQ(per_line, a.elements_per_line());
  }
}

TEST(OocMapping, WriteModeMergesWritesOfALineAcrossEvictions) {
  mapped_file t("merge.bin", 16, 4, tiny(mode::write, 2, 6));
  auto expect = as<std::uint64_t>(t.before);
  auto a = t.m.ref<std::uint64_t>();
  // Even elements first, then odd ones: every line leaves the 2-line GPU cache in between.
  for (std::uint64_t parity = 0; parity < 2; ++parity) {
    std::vector<std::uint64_t> idx;
    std::vector<std::uint64_t> val;
    for (std::uint64_t i = parity; i < expect.size(); i += 2) {
      if (i % 5 == 0) continue;  // some elements are never written
      idx.push_back(i);
      val.push_back(i * 1000 + parity);
      expect[i] = i * 1000 + parity;
    }
    expect_all(store(a, idx, val), status::ok);
  }
  t.m.unmap();
  EXPECT_EQ(as<std::uint64_t>(read_file(t.path)), expect);
}

TEST(OocMapping, VolatileDataSpillsAndNeverReachesTheFile) {
  mapped_file t("v.bin", 64, 6, tiny(mode::volatile_data));
  const auto& before = t.before;
  auto a = t.m.ref<std::uint32_t>();
  const auto r = read_lines<32>(a);  // starts as the file's bytes
  expect_all(r.st, status::ok);
  EXPECT_EQ(r.values, as<std::uint32_t>(before));
  const auto values = numbers(a.size(), 11);
  expect_all(write_lines<32>(a, values, access::write), status::ok);
  const auto back = read_lines<8>(a);  // 64 lines through 8 + 6 cached: most come back spilled
  expect_all(back.st, status::ok);
  EXPECT_EQ(back.values, values);
  t.m.sync();  // nothing to write: the data is volatile
  const auto s = t.m.stats();
  EXPECT_GT(s.spill_bytes_written, 0u);
  EXPECT_GT(s.spill_bytes_read, 0u);  // the spilled lines read back
  EXPECT_LE(s.spill_bytes_read, s.spill_bytes_written * 2);
  EXPECT_EQ(s.file_bytes_written, 0u);
  EXPECT_EQ(s.syncs, 0u);
  t.m.unmap();
  EXPECT_EQ(read_file(t.path), before);
}

TEST(OocMapping, VolatileScratchDataStartsAtZero) {
  files f;
  auto o = tiny(mode::volatile_data);
  o.spill_dir = f.dirs.snapshot_dir();
  mapping m("", lines(25), 0, o);
  auto a = m.ref<std::uint32_t>();
  const auto r = read_lines<1>(a);
  expect_all(r.st, status::ok);
  EXPECT_EQ(r.values, std::vector<std::uint32_t>(a.size(), 0));
  const auto values = numbers(a.size(), 3);
  expect_all(write_lines<32>(a, values, access::write), status::ok);
  EXPECT_EQ(load(a, iota(a.size())).values, values);
  // The spill file is unlinked: nothing is left in its directory.
  EXPECT_TRUE(std::filesystem::is_empty(f.dirs.snapshot_dir()));
}

TEST(OocMapping, AccessesPastTheEndTouchNothing) {
  mapped_file t("end.bin", 10, 7, tiny(mode::read_write));
  auto a = t.m.ref<std::uint32_t>();
  const std::vector<std::uint64_t> past = {a.size(), a.size() + 1, a.size() + 12345,
                                           std::numeric_limits<std::uint64_t>::max()};
  expect_all(load(a, past).st, status::out_of_range);
  expect_all(store(a, past, std::vector<std::uint32_t>(past.size(), 1)), status::out_of_range);
  EXPECT_EQ(t.m.stats().gpu_misses, 0u);
  t.m.unmap();
  EXPECT_EQ(read_file(t.path), pattern(lines(10), 7));
}

TEST(OocMapping, LineAccessWorksForEveryTileSize) {
  mapped_file t("tiles.bin", 24, 8, tiny(mode::read_write, 4, 6));
  auto expect = as<std::uint32_t>(t.before);
  auto a = t.m.ref<std::uint32_t>();
  EXPECT_EQ(read_lines<1>(a).values, expect);
  EXPECT_EQ(read_lines<4>(a).values, expect);
  EXPECT_EQ(read_lines<32>(a).values, expect);
  const auto add = numbers(a.size(), 1);
  expect_all(write_lines<1>(a, add, access::read_write), status::ok);
  expect_all(write_lines<16>(a, add, access::read_write), status::ok);
  for (std::size_t i = 0; i < expect.size(); ++i) expect[i] += 2 * add[i];
  t.m.unmap();
  EXPECT_EQ(as<std::uint32_t>(read_file(t.path)), expect);
}

TEST(OocMapping, CreateMakesAndExtendsTheFile) {
  files f;
  const std::string fresh = f.disk("fresh.bin");
  {
    auto o = tiny(mode::write);
    o.create = true;
    mapping m(fresh, lines(16), lines(2), o);
    auto a = m.ref<std::uint32_t>();
    expect_all(store(a, {0, 100}, {7, 9}), status::ok);
  }
  auto bytes = read_file(fresh);
  ASSERT_EQ(bytes.size(), lines(2) + lines(16));
  auto words = as<std::uint32_t>(bytes);
  const std::uint64_t first = lines(2) / 4;
  EXPECT_EQ(words[first], 7u);
  EXPECT_EQ(words[first + 100], 9u);
  words[first] = words[first + 100] = 0;
  EXPECT_EQ(words, std::vector<std::uint32_t>(words.size(), 0));

  const std::string shorter = f.make("short.bin", 1000, 9);
  {
    auto o = tiny(mode::read_write);
    o.create = true;
    mapping m(shorter, 20000, 0, o);
    EXPECT_EQ(load(m.ref<std::uint8_t>(), {999, 1000}).values,
              (std::vector<std::uint8_t>{pattern(1000, 9)[999], 0}));
  }
  EXPECT_EQ(std::filesystem::file_size(shorter), 20000u);
}

// DRAGON's vectorAdd: two inputs mapped read-only and an output mapped write-only, in one kernel.
__global__ void vector_add(gpm::ooc::array<float> a, gpm::ooc::array<float> b,
                           gpm::ooc::array<float> c, unsigned* failures) {
  for (std::uint64_t i : gpm::grid_stride(c.size())) {
    float x = 0, y = 0;
    if (a.get(i, x) != status::ok || b.get(i, y) != status::ok || c.set(i, x + y) != status::ok) {
      atomicAdd(failures, 1u);
    }
  }
}

TEST(OocMapping, SeveralMappingsAtOnce) {
  files f;
  const std::size_t n = 20000;
  std::vector<float> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(3 * i) + 0.5f;
  }
  auto bytes_of = [](const std::vector<float>& v) {
    std::vector<unsigned char> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  // Both inputs in one file, at two offsets; the output in a file of its own.
  auto in = bytes_of(x);
  const auto second = bytes_of(y);
  in.insert(in.end(), second.begin(), second.end());
  write_file(f.disk("in.bin"), in);
  mapping a(f.disk("in.bin"), n * 4, 0, tiny(mode::read));
  mapping b(f.disk("in.bin"), n * 4, n * 4, tiny(mode::read));
  auto o = tiny(mode::write);
  o.create = true;
  mapping c(f.disk("out.bin"), n * 4, 0, o);
  gpm::device_buffer<unsigned> failures(1);
  failures.fill_bytes(0);
  gpm::launch(vector_add, kBlocks, kThreads, 0, nullptr, a.ref<float>(), b.ref<float>(),
              c.ref<float>(), failures.data());
  gpm::test::sync_ok();
  EXPECT_EQ(gpm::test::to_host(failures)[0], 0u);
  c.unmap();
  const auto out = as<float>(read_file(f.disk("out.bin")));
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << i;
}

TEST(OocMapping, UnalignedRangesAndPartialLastLines) {
  files f;
  const std::size_t file_bytes = lines(25) + 3;
  const std::string path = f.make("odd.bin", file_bytes, 10);
  auto expect = read_file(path);
  const std::uint64_t offset = 12345;
  const std::uint64_t size = lines(9) + 12;  // not a whole number of lines
  {
    mapping m(path, size, offset, tiny(mode::read_write, 3, 6));
    EXPECT_FALSE(m.direct_io());  // the range does not start on a block boundary
    auto a = m.ref<std::uint32_t>();
    const auto r = read_lines<32>(a);
    expect_all(r.st, status::ok);
    std::vector<unsigned char> got(size);
    std::memcpy(got.data(), r.values.data(), size);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expect.begin() + offset));
    const auto values = numbers(a.size(), 77);
    expect_all(write_lines<32>(a, values, access::write), status::ok);
    std::memcpy(expect.data() + offset, values.data(), size);
  }
  EXPECT_EQ(read_file(path), expect);  // the bytes around the range are untouched
}

TEST(OocMapping, SyncOfARangeWritesThatRangeOnly) {
  mapped_file t("range.bin", 16, 12, tiny(mode::read_write, 16, 6));  // all lines fit the GPU
  auto a = t.m.ref<std::uint32_t>();
  const auto values = numbers(a.size(), 2);
  expect_all(write_lines<32>(a, values, access::write), status::ok);
  t.m.sync(2 * line_size() + 100, line_size());  // lines 2 and 3
  auto expect = t.before;
  std::memcpy(expect.data() + lines(2), reinterpret_cast<const char*>(values.data()) + lines(2),
              lines(2));
  EXPECT_EQ(read_file(t.path), expect);
  t.m.sync();
  EXPECT_EQ(as<std::uint32_t>(read_file(t.path)), values);
  expect_error(gpm::errc::invalid_argument, "outside the mapping",
               [&] { t.m.sync(lines(15), lines(2)); });
}

TEST(OocMapping, PrefetchFillsTheGpuCacheAhead) {
  auto o = tiny(mode::read, 16, 16);
  o.resident = false;  // the GPU cache holds all 16 lines: resident, prefetch would do nothing
  mapped_file t("pre.bin", 16, 13, o);
  gpm::stream s;
  t.m.prefetch(0, lines(16), s);
  s.synchronize();
  EXPECT_EQ(t.m.stats().gpu_misses, 16u);
  const auto r = read_lines<32>(t.m.ref<std::uint32_t>());
  EXPECT_EQ(r.values, as<std::uint32_t>(pattern(lines(16), 13)));
  const auto st = t.m.stats();
  EXPECT_EQ(st.gpu_misses, 16u);  // every line was there already
  EXPECT_EQ(st.gpu_hits, 16u);
  expect_error(gpm::errc::invalid_argument, "outside the mapping",
               [&] { t.m.prefetch(lines(16), 1, s); });
}

// Read-ahead reads queued consecutive lines in runs of at most read_ahead_run_bytes: one line a
// read, or several (the stream's lines and the window allowing).
// Maps the 128 lines of `path` with `o`, has one warp read them in order, checks what it read
// against `expect`, and returns the mapping's telemetry.
gpm::ooc::mapping_stats read_in_order(const std::string& path, const mapping_options& o,
                                      const std::vector<std::uint32_t>& expect) {
  mapping m(path, lines(128), 0, o);
  auto a = m.ref<std::uint32_t>();
  gpm::device_buffer<std::uint32_t> out(a.size());
  gpm::device_buffer<status> st(128);
  gpm::launch(line_read_kernel<32, std::uint32_t>, 1, 32, 0, nullptr, a, out.data(), st.data());
  gpm::test::sync_ok();
  EXPECT_EQ(gpm::test::to_host(out), expect);
  return m.stats();
}

// Every thread of a launch loads an element of one line that the GPU cache does not hold: one
// warp fills it and the others read it once it lands (acquire_line's `held`): every element
// arrives, and no slot is left with a reference (a leaked one would pin the line in the GPU cache
// for good; a release without one would wrap the count into the slot word's flags).
__global__ void one_line_loads(gpm::ooc::array<std::uint32_t> a, std::uint64_t first,
                               std::uint32_t per_line, std::uint32_t* out, status* st) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  st[i] = a.get(first + i % per_line, out[i]);
}

TEST(OocMapping, WarpsMissingOneLineTogetherLeaveNoReference) {
  namespace e = gpm::detail::ooc;
  files f;
  const std::string path = f.make("one-line.bin", lines(4), 41);
  const auto expect = as<std::uint32_t>(pattern(lines(4), 41));
  mapping m(path, lines(4), 0, tiny(mode::read, 2));
  const auto a = m.ref<std::uint32_t>();
  const std::uint32_t per_line = a.elements_per_line();
  constexpr std::uint32_t kThreads = 8 * 128;
  gpm::device_buffer<std::uint32_t> out(kThreads);
  gpm::device_buffer<status> st(kThreads);
  for (const std::uint64_t line : {1, 3}) {
    SCOPED_TRACE(line);
    gpm::launch(one_line_loads, 8, 128, 0, nullptr, a, line * per_line, per_line, out.data(),
                st.data());
    gpm::test::sync_ok();
    const auto values = gpm::test::to_host(out);
    const auto statuses = gpm::test::to_host(st);
    for (std::uint32_t i = 0; i < kThreads; ++i) {
      ASSERT_EQ(statuses[i], status::ok) << i;
      ASSERT_EQ(values[i], expect[line * per_line + i % per_line]) << i;
    }
    std::vector<std::uint64_t> words(a.view().capacity);
    gpm::check_cuda(cudaMemcpy(words.data(), a.view().slot_word, words.size() * sizeof(words[0]),
                               cudaMemcpyDeviceToHost),
                    "slot words");
    for (std::size_t k = 0; k < words.size(); ++k) {
      EXPECT_EQ(words[k] & (e::kBusy | e::kRefMask), 0u) << "slot " << k;
    }
  }
}

TEST(OocMapping, ReadAheadReadsInRunsOfTheGivenSize) {
  files f;
  const std::string path = f.make("run.bin", lines(128), 23);
  const auto expect = as<std::uint32_t>(pattern(lines(128), 23));
  for (const std::uint64_t run : {1, 8}) {
    auto o = tiny(mode::read, 2, 64);
    o.read_ahead_window = 8;
    o.read_ahead_run_bytes = lines(run);
    const auto s = read_in_order(path, o, expect);
    ASSERT_GT(s.read_ahead_lines, 0u) << run;
    if (run == 1) {
      EXPECT_EQ(s.read_ahead_reads, s.read_ahead_lines);
    } else {
      // Runs of more than one line on average, none longer than the run.
      EXPECT_LT(s.read_ahead_reads * 2, s.read_ahead_lines) << s.read_ahead_reads;
      EXPECT_GE(s.read_ahead_reads * run, s.read_ahead_lines);
    }
  }
}

TEST(OocMapping, ReadAheadFollowsSequentialMisses) {
  files f;
  const std::string path = f.make("ra.bin", lines(128), 14);
  const auto expect = as<std::uint32_t>(pattern(lines(128), 14));
  for (const auto hint : {gpm::ooc::access_hint::sequential, gpm::ooc::access_hint::random}) {
    auto o = tiny(mode::read, 2, 32);
    o.hint = hint;
    o.read_ahead_window = 8;
    const auto s = read_in_order(path, o, expect);
    // Every fill pinned one line for the GPU (a host hit or miss), and was timed.
    EXPECT_GE(s.fills, 128u - 32u);
    EXPECT_EQ(s.fills, s.host_hits + s.host_misses);
    EXPECT_GT(s.fill_seconds, 0.0);
    if (hint == gpm::ooc::access_hint::sequential) {
      EXPECT_GT(s.read_ahead_lines, 0u);
      EXPECT_GT(s.read_ahead_hits, 0u);
      EXPECT_GT(s.host_hits, 0u);
      EXPECT_GT(s.read_ahead_read_seconds, 0.0);  // the read-ahead reads, timed
    } else {
      EXPECT_EQ(s.read_ahead_lines, 0u);
      EXPECT_EQ(s.host_hits, 0u);
      EXPECT_EQ(s.read_ahead_read_seconds, 0.0);
    }
  }
}

template <class T>
__global__ void touch_kernel(gpm::ooc::array<T> a, const std::uint64_t* idx, std::uint64_t n,
                             status* st) {
  for (std::uint64_t k : gpm::grid_stride(n)) st[k] = a.touch(idx[k]);
}

std::vector<status> touch(const gpm::ooc::array<std::uint32_t>& a,
                          const std::vector<std::uint64_t>& idx) {
  auto d_idx = gpm::test::to_device(idx);
  gpm::device_buffer<status> st(idx.size());
  gpm::launch(touch_kernel<std::uint32_t>, kBlocks, kThreads, 0, nullptr, a, d_idx.data(),
              std::uint64_t{idx.size()}, st.data());
  gpm::test::sync_ok();
  return gpm::test::to_host(st);
}

// touch() returns at once; the host reads the touched lines into its cache, so the misses that
// follow are host cache hits.
TEST(OocMapping, TouchReadsLinesIntoTheHostCacheAhead) {
  auto o = tiny(mode::read_write, 16, 24);
  o.hint = gpm::ooc::access_hint::random;  // no read-ahead of its own
  mapped_file t("touch.bin", 32, 16, o);
  auto a = t.m.ref<std::uint32_t>();
  // Lines 0 to 15, every element of them: one hint per line per warp.
  const std::vector<std::uint64_t> idx = iota(16 * a.elements_per_line());
  expect_all(touch(a, idx), status::ok);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (t.m.stats().read_ahead_lines < 16 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto s = t.m.stats();
  EXPECT_EQ(s.read_ahead_lines, 16u);
  EXPECT_GE(s.touch_hints, 16u);
  EXPECT_EQ(s.gpu_misses, 0u);  // nothing was fetched into the GPU: the kernel did not wait
  const auto r = load(a, iota(16 * a.elements_per_line()));
  expect_all(r.st, status::ok);
  EXPECT_EQ(r.values, as<std::uint32_t>(std::vector<unsigned char>(t.before.begin(),
                                                                   t.before.begin() + lines(16))));
  s = t.m.stats();
  EXPECT_EQ(s.host_hits, 16u);
  EXPECT_EQ(s.host_misses, 0u);
  EXPECT_EQ(s.read_ahead_hits, 16u);
  // A line in the GPU cache already is not hinted again; past the end is out_of_range.
  const std::uint64_t hinted = s.touch_hints;
  expect_all(touch(a, {0, 1, a.elements_per_line()}), status::ok);
  expect_all(touch(a, {a.size(), a.size() + 5}), status::out_of_range);
  EXPECT_EQ(t.m.stats().touch_hints, hinted);
}

TEST(OocMapping, TouchOfAWriteOnlyMappingHintsNothing) {
  mapped_file t("touchw.bin", 8, 17, tiny(mode::write));
  auto a = t.m.ref<std::uint32_t>();
  expect_all(touch(a, iota(a.size())), status::ok);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(t.m.stats().touch_hints, 0u);
  EXPECT_EQ(t.m.stats().read_ahead_lines, 0u);
}

// Every thread of the grid reads elements of the same four lines: each line is fetched once.
TEST(OocMapping, ALineIsFetchedOnceHoweverManyThreadsWantIt) {
  auto o = tiny(mode::read, 8, 6);
  o.hint = gpm::ooc::access_hint::random;  // no read-ahead: the file is read for misses only
  mapped_file t("hot.bin", 16, 15, o);
  auto a = t.m.ref<std::uint32_t>();
  std::vector<std::uint64_t> idx(8 * 1024);
  for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = (k * 7919) % (4 * a.elements_per_line());
  const auto r = load(a, idx);
  expect_all(r.st, status::ok);
  const auto all = as<std::uint32_t>(pattern(lines(16), 15));
  for (std::size_t k = 0; k < idx.size(); ++k) ASSERT_EQ(r.values[k], all[idx[k]]) << k;
  const auto s = t.m.stats();
  EXPECT_EQ(s.gpu_misses, 4u);
  EXPECT_EQ(s.host_misses, 4u);
  EXPECT_EQ(s.file_bytes_read, lines(4));
}

// An I/O thread keeps several misses under way, each holding a host cache entry pinned until its
// copy ends; in the smallest host cache (2 entries per I/O thread and 2 more) the threads must
// never hold them all, or every thread waits in pin() for an entry that only they would unpin.
// Misses of many warps over a file eight times the GPU cache, in every mode that fetches.
TEST(OocMapping, MissesUnderWayNeverPinTheWholeHostCache) {
  for (const mode md : {mode::read, mode::read_write}) {
    auto o = tiny(md, 8, 6);
    o.hint = gpm::ooc::access_hint::random;
    mapped_file t("pins.bin", 64, 21, o);
    auto a = t.m.ref<std::uint32_t>();
    std::vector<std::uint64_t> idx(16 * 1024);
    std::mt19937_64 rng(7);
    for (auto& i : idx) i = rng() % (64 * a.elements_per_line());
    const auto r = load(a, idx);
    expect_all(r.st, status::ok);
    const auto all = as<std::uint32_t>(pattern(lines(64), 21));
    for (std::size_t k = 0; k < idx.size(); ++k) ASSERT_EQ(r.values[k], all[idx[k]]) << k;
    EXPECT_GT(t.m.stats().gpu_misses, 64u) << to_string(md);
  }
}

// A grid-stride pass whose grid the device runs at once (gpm::resident_blocks) walks a file four
// times the GPU cache once, so each line is fetched about once (a warp that lags far behind may
// fetch one again); a grid in waves would fetch every line once per wave.
TEST(OocMapping, AResidentGridFetchesEachLineOfAStreamAboutOnce) {
  auto o = tiny(mode::read, 64, 16);
  o.hint = gpm::ooc::access_hint::random;
  mapped_file t("stream.bin", 256, 22, o);
  auto a = t.m.ref<std::uint32_t>();
  const unsigned blocks = std::min<std::uint64_t>(
      gpm::resident_blocks(load_kernel<std::uint32_t>, kThreads), a.size() / kThreads);
  const auto r = load(a, iota(a.size()), blocks);
  expect_all(r.st, status::ok);
  EXPECT_EQ(r.values, as<std::uint32_t>(t.before));
  const auto s = t.m.stats();
  EXPECT_GE(s.gpu_misses, 256u);
  EXPECT_LT(s.gpu_misses, 2 * 256u);
}

// A streaming pass that stores every element of a read_write mapping four times the GPU cache and
// sixteen times the host cache: read-ahead reads each line about once, although the write-backs of
// the stored lines compete with it for the host cache (each line was read up to ten times when
// every miss queued its whole window again and write-backs evicted lines read ahead but unused).
TEST(OocMapping, AStreamingReadWritePassReadsEachLineAboutOnce) {
  auto o = tiny(mode::read_write, 64, 16);
  o.hint = gpm::ooc::access_hint::sequential;
  mapped_file t("rwstream.bin", 256, 23, o);
  auto a = t.m.ref<std::uint32_t>();
  const auto values = numbers(a.size(), 5);
  // At most 16 blocks: a grid of a whole GPU would have 16 lines in flight at each step, as many as
  // the host cache holds, and the cache would be too small for the stream, not its policy wrong.
  const unsigned blocks =
      std::min<unsigned>(gpm::resident_blocks(store_kernel<std::uint32_t>, kThreads), 16);
  auto idx = gpm::test::to_device(iota(a.size()));
  auto val = gpm::test::to_device(values);
  gpm::device_buffer<status> st(a.size());
  gpm::launch(store_kernel<std::uint32_t>, blocks, kThreads, 0, nullptr, a, idx.data(), a.size(),
              val.data(), st.data());
  gpm::test::sync_ok();
  expect_all(gpm::test::to_host(st), status::ok);
  const auto s = t.m.stats();
  EXPECT_GE(s.file_bytes_read, lines(256));
  EXPECT_LT(s.file_bytes_read, lines(256) * 3 / 2);
  EXPECT_GT(s.read_ahead_hits, 0u);
  t.m.sync();
  EXPECT_EQ(as<std::uint32_t>(read_file(t.path)), values);
}

// Write-behind (mapping_options::write_behind, on by default): dirty lines that left the GPU cache
// for the host cache reach the file while the mapping idles, before any sync, and sync writes the
// rest; the file then holds every store. Off, they wait in the host cache for sync. The lines are
// written one kernel each, in order, so that those left in the GPU cache are the last ones and
// the 28 others form one run (write-behind waits for runs of a quarter of the host cache, 8
// lines: one grid writing all lines at once left a GPU's cache holding lines spread over the
// range, which split the rest into runs too short).
TEST(OocMapping, WriteBehindWritesEvictedLinesBeforeSync) {
  using namespace std::chrono_literals;
  for (const bool on : {true, false}) {
    auto o = tiny(mode::read_write, 4, 32);  // the host cache holds every line
    o.write_behind = on;
    mapped_file t(on ? "behind-on.bin" : "behind-off.bin", 32, 31, o);
    auto a = t.m.ref<std::uint32_t>();
    const auto values = numbers(a.size(), 6);
    const std::uint64_t per_line = a.elements_per_line();
    for (std::uint64_t from = 0; from < a.size(); from += per_line) {
      const std::uint64_t n = std::min<std::uint64_t>(per_line, a.size() - from);
      const std::vector<std::uint32_t> part(values.begin() + static_cast<std::ptrdiff_t>(from),
                                            values.begin() + static_cast<std::ptrdiff_t>(from + n));
      expect_all(store(a, iota(n, from), part), status::ok);
    }
    // At least 28 of the 32 lines left the 4-line GPU cache, dirty.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (on && t.m.stats().write_behind_lines < 16 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    if (!on) std::this_thread::sleep_for(50ms);  // time enough to write, if it would
    const auto s = t.m.stats();
    if (on) {
      EXPECT_GE(s.write_behind_lines, 16u);
      EXPECT_GE(s.file_bytes_written, lines(16));
    } else {
      EXPECT_EQ(s.write_behind_lines, 0u);
      EXPECT_EQ(s.file_bytes_written, 0u);
    }
    EXPECT_TRUE(s.last_io_error.empty()) << s.last_io_error;
    t.m.sync();
    EXPECT_EQ(as<std::uint32_t>(read_file(t.path)), values) << (on ? "on" : "off");
  }
}

TEST(OocMapping, UnmapEndsTheMappingOnce) {
  files f;
  const std::string path = f.make("unmap.bin", lines(4), 16);
  mapping m(path, lines(4), 0, tiny(mode::read_write));
  EXPECT_TRUE(m.mapped());
  m.unmap();
  m.unmap();
  EXPECT_FALSE(m.mapped());
  EXPECT_EQ(m.path(), path);
  EXPECT_EQ(m.size(), lines(4));
  expect_error(gpm::errc::invalid_argument, "unmapped", [&] { m.ref<int>(); });
  expect_error(gpm::errc::invalid_argument, "unmapped", [&] { m.sync(); });
  expect_error(gpm::errc::invalid_argument, "unmapped", [&] { m.stats(); });
  // The range is free again, for a new writer; moves carry the mapping.
  mapping again(path, lines(4), 0, tiny(mode::read_write));
  mapping moved(std::move(again));
  EXPECT_TRUE(moved.mapped());
  // What is left behind is empty: never a crash, a clear error from anything that needs a mapping.
  EXPECT_FALSE(again.mapped());  // NOLINT(bugprone-use-after-move): on purpose
  again.unmap();
  expect_error(gpm::errc::invalid_argument, "moved from", [&] { (void)again.size(); });
  expect_error(gpm::errc::invalid_argument, "moved from", [&] { again.ref<int>(); });
  expect_error(gpm::errc::invalid_argument, "moved from", [&] { again.sync(); });
  expect_error(gpm::errc::invalid_argument, "moved from", [&] { again.stats(); });
  expect_error(gpm::errc::invalid_argument, "moved from", [&] { (void)again.resident(); });
  moved = mapping(f.make("other.bin", lines(4), 17), lines(2), lines(2), tiny(mode::read));
  EXPECT_EQ(moved.offset(), lines(2));
  EXPECT_EQ(moved.options().mode, mode::read);
  EXPECT_EQ(moved.gpu_cache_lines(), 2u);  // the mapping's lines bound the cache
  EXPECT_EQ(moved.host_cache_lines(), 6u);
}

TEST(OocMapping, PageCacheTransfersWhenDirectIoIsOff) {
  files f;
  const std::string path = f.tmpfs("shm.bin");
  write_file(path, pattern(lines(8), 17));
  auto o = tiny(mode::read_write);
  o.direct_io = false;
  mapping m(path, lines(8), 0, o);
  EXPECT_FALSE(m.direct_io());
  auto a = m.ref<std::uint32_t>();
  EXPECT_EQ(read_lines<32>(a).values, as<std::uint32_t>(pattern(lines(8), 17)));
  const auto values = numbers(a.size(), 9);
  expect_all(write_lines<32>(a, values, access::write), status::ok);
  m.unmap();
  EXPECT_EQ(as<std::uint32_t>(read_file(path)), values);
}

TEST(OocMapping, StripedOverSeveralFiles) {
  files f;
  // 20 lines over 3 files from offset lines(1): files 0 and 1 hold 7 lines, file 2 holds 6, and
  // the last line (19, in file 1) is partial.
  const std::uint64_t offset = lines(1);
  const std::uint64_t size = lines(20) - 400;
  std::vector<std::string> paths(3);
  std::vector<std::vector<unsigned char>> contents(3);
  for (int k = 0; k < 3; ++k) {
    paths[k] = f.make("stripe" + std::to_string(k), offset + lines(7), 40 + k);
    contents[k] = read_file(paths[k]);
  }
  {
    mapping m(paths, size, offset, tiny(mode::read_write, 4, 6));
    EXPECT_EQ(m.paths(), paths);
    EXPECT_EQ(m.path(), paths[0]);
    EXPECT_TRUE(m.direct_io());
    auto a = m.ref<std::uint32_t>();
    const auto r = read_lines<32>(a);
    expect_all(r.st, status::ok);
    EXPECT_EQ(r.values, as<std::uint32_t>(gather(contents, offset, size)));
    const auto values = numbers(a.size(), 21);
    expect_all(write_lines<32>(a, values, access::write), status::ok);
    std::vector<unsigned char> bytes(size);
    std::memcpy(bytes.data(), values.data(), size);
    scatter(contents, offset, bytes);
  }
  for (int k = 0; k < 3; ++k) EXPECT_EQ(read_file(paths[k]), contents[k]) << paths[k];
  // Each file must hold its share; no more files than lines.
  expect_error(gpm::errc::invalid_argument, "fewer than",
               [&] { mapping m(paths, lines(23), offset, tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "cannot share",
               [&] { mapping m(paths, lines(2), 0, tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "path is empty", [&] {
    mapping m({paths[0], ""}, lines(4), 0, tiny(mode::volatile_data));
  });
  // A file named twice would be written through two locks of one range.
  expect_error(gpm::errc::busy, "overlap", [&] {
    mapping m({paths[0], paths[0]}, lines(4), 0, tiny(mode::read_write));
  });
}

// ---- resident mappings: every line in the GPU cache from map time on -------------------------

// The first `size` bytes of `file` as elements of T.
template <class T>
std::vector<T> prefix(const std::vector<unsigned char>& file, std::uint64_t size) {
  return as<T>(std::vector<unsigned char>(file.begin(), file.begin() + static_cast<long>(size)));
}

// The bytes of `file` with its first elements replaced by `v`.
std::vector<unsigned char> over(std::vector<unsigned char> file,
                                const std::vector<std::uint32_t>& v) {
  std::memcpy(file.data(), v.data(), v.size() * 4);
  return file;
}

// A file of `file_lines` lines of pattern bytes, of which a test maps the first `size` bytes.
struct partly_mapped {
  files f;
  std::uint64_t size;
  std::string path;
  std::vector<unsigned char> before;
  std::vector<std::uint32_t> expect;  // the mapped elements, as kernels must see them
  partly_mapped(const std::string& name, std::uint64_t file_lines, std::uint64_t bytes,
                std::uint64_t seed)
      : size(bytes),
        path(f.make(name, lines(file_lines), seed)),
        before(read_file(path)),
        expect(prefix<std::uint32_t>(before, bytes)) {}
};

TEST(OocResident, ReadWriteLoadsEveryLineAtMapTimeAndWritesBackWhatWasStored) {
  // 37 lines and 100 elements of a 40-line file: the last line partial, the file's tail unmapped;
  // a 6-line host cache stages the load in runs of 3 lines.
  partly_mapped t("res.bin", 40, lines(37) + 400, 21);
  const std::uint64_t size = t.size;
  const std::string& path = t.path;
  const auto& before = t.before;
  auto& expect = t.expect;
  {
    mapping m(path, size, 0, tiny(mode::read_write, 38, 6));
    ASSERT_TRUE(m.resident());
    auto s = m.stats();
    EXPECT_EQ(s.bytes_to_gpu, lines(38));
    EXPECT_EQ(s.file_bytes_read, size);
    EXPECT_GE(s.resident_reads, 1u);  // the load's reads, timed
    EXPECT_GT(s.resident_read_seconds, 0.0);
    // Map time and its parts: the load holds the reads, and the whole holds the parts.
    EXPECT_GE(s.map_load_seconds, s.resident_read_seconds);
    EXPECT_GT(s.map_allocate_seconds, 0.0);
    EXPECT_GT(s.map_gpu_cache_seconds, 0.0);
    EXPECT_GT(s.map_host_cache_seconds, 0.0);
    EXPECT_GE(s.map_allocate_seconds, s.map_gpu_cache_seconds + s.map_host_cache_seconds);
    EXPECT_GE(s.map_seconds, s.map_allocate_seconds + s.map_load_seconds);
    auto a = m.ref<std::uint32_t>();
    const auto r = read_lines<32>(a);
    expect_all(r.st, status::ok);
    ASSERT_EQ(r.values, expect);
    const auto e = load(a, iota(a.size()));
    expect_all(e.st, status::ok);
    ASSERT_EQ(e.values, expect);
    // Every fifth element by element access, then every element plus numbers() by line access.
    std::vector<std::uint64_t> idx;
    std::vector<std::uint32_t> val;
    for (std::uint64_t i = 0; i < a.size(); i += 5) {
      idx.push_back(i);
      val.push_back(static_cast<std::uint32_t>(i * 3 + 2));
      expect[i] = val.back();
    }
    expect_all(store(a, idx, val), status::ok);
    const auto add = numbers(a.size(), 4);
    expect_all(write_lines<16>(a, add, access::read_write), status::ok);
    for (std::size_t i = 0; i < expect.size(); ++i) expect[i] += add[i];
    EXPECT_EQ(read_file(path), before);  // nothing reaches the file before sync
    m.sync();
    EXPECT_EQ(read_file(path), over(before, expect));
    // Stores after the sync are written back by unmap; touch and prefetch have nothing to do.
    expect_all(store(a, {1, a.size() - 1}, {99u, 98u}), status::ok);
    expect[1] = 99;
    expect.back() = 98;
    expect_all(touch(a, iota(a.size())), status::ok);
    gpm::stream st;
    m.prefetch(0, size, st);
    st.synchronize();
    s = m.stats();
    EXPECT_EQ(s.gpu_hits, 0u);  // nothing was acquired: every access went straight to its slot
    EXPECT_EQ(s.gpu_misses, 0u);
    EXPECT_EQ(s.touch_hints, 0u);
    EXPECT_EQ(s.file_bytes_read, size);  // the load was the only read
    EXPECT_EQ(s.gpu_io_errors, 0u);
    EXPECT_EQ(s.bytes_from_gpu, lines(38));  // the sync copied every line out once
  }
  EXPECT_EQ(read_file(path), over(before, expect));
}

TEST(OocResident, WriteModeStartsAtZeroAndWritesBackOnlyTheBytesStored) {
  partly_mapped t("resw.bin", 21, lines(20) + 96, 22);
  const std::string& path = t.path;
  const auto& before = t.before;
  auto& expect = t.expect;
  mapping m(path, t.size, 0, tiny(mode::write, 21, 6));
  ASSERT_TRUE(m.resident());
  EXPECT_EQ(m.stats().bytes_to_gpu, 0u);  // nothing is fetched
  EXPECT_EQ(m.stats().file_bytes_read, 0u);
  auto a = m.ref<std::uint32_t>();
  expect_all(load(a, {0}).st, status::write_only);
  gpm::device_buffer<status> st(1);
  for (std::uint64_t round = 0; round < 2; ++round) {
    std::vector<std::uint64_t> idx;
    std::vector<std::uint32_t> val;
    for (std::uint64_t i = round; i < a.size(); i += 7) {  // sparse: runs of one element
      idx.push_back(i);
      val.push_back(static_cast<std::uint32_t>(i ^ 0xabcd) + static_cast<std::uint32_t>(round));
      expect[i] = val.back();
    }
    expect_all(store(a, idx, val), status::ok);
    m.sync();
    ASSERT_EQ(read_file(path), over(before, expect)) << "round " << round;
  }
  // Whole lines by line access: the tile writes every element, the mask is not needed.
  const auto whole = numbers(a.size(), 8);
  expect_all(write_lines<32>(a, whole, access::write), status::ok);
  m.unmap();
  EXPECT_EQ(read_file(path), over(before, whole));
}

TEST(OocResident, ReadAndVolatileMappingsNeverWriteBack) {
  partly_mapped t("resr.bin", 10, lines(9) + 12, 23);
  const std::uint64_t size = t.size;
  const std::string& path = t.path;
  const auto& before = t.before;
  for (const mode md : {mode::read, mode::volatile_data}) {
    mapping m(path, size, 0, tiny(md, 10, 6));
    ASSERT_TRUE(m.resident()) << to_string(md);
    auto a = m.ref<std::uint32_t>();
    EXPECT_EQ(load(a, iota(a.size())).values, t.expect);
    if (md == mode::read) {
      expect_all(store(a, {0, 5}, {1u, 2u}), status::read_only);
      expect_all(write_lines<1>(a, numbers(a.size(), 1), access::read_write), status::read_only);
    } else {
      const auto v = numbers(a.size(), 2);
      expect_all(store(a, iota(a.size()), v), status::ok);
      EXPECT_EQ(load(a, iota(a.size())).values, v);
    }
    m.sync();
    m.unmap();
    EXPECT_EQ(read_file(path), before) << to_string(md);
  }
  // Scratch data without a file starts at zero.
  mapping scratch("", size, 0, tiny(mode::volatile_data, 10, 6));
  ASSERT_TRUE(scratch.resident());
  EXPECT_EQ(load(scratch.ref<std::uint32_t>(), iota(size / 4)).values,
            std::vector<std::uint32_t>(size / 4, 0));
}

// What create adds to a file can only be zeros: the resident load reads the old part alone, and
// what is written there is read back by the next mapping.
TEST(OocResident, TheLoadReadsOnlyWhatTheFileHeldBeforeCreateExtendedIt) {
  files f;
  const std::string path = f.make("resc.bin", lines(3) + 100, 25);
  auto expect = read_file(path);
  expect.resize(lines(7) + 40, 0);
  auto o = tiny(mode::read_write, 8, 6);
  o.create = true;
  {
    mapping m(path, lines(7) + 40, 0, o);
    ASSERT_TRUE(m.resident());
    EXPECT_EQ(m.stats().file_bytes_read, lines(3) + 100);
    EXPECT_EQ(m.stats().bytes_to_gpu, lines(4));  // the lines holding data; the rest set on the GPU
    auto a = m.ref<std::uint32_t>();
    EXPECT_EQ(load(a, iota(a.size())).values, as<std::uint32_t>(expect));
    expect_all(store(a, {a.size() - 1}, {77u}), status::ok);
    expect[lines(7) + 36] = 77;
  }
  mapping again(path, lines(7) + 40, 0, o);
  EXPECT_EQ(again.stats().file_bytes_read, lines(7) + 40);
  EXPECT_EQ(load(again.ref<std::uint32_t>(), iota((lines(7) + 40) / 4)).values,
            as<std::uint32_t>(expect));
  const std::string fresh = f.disk("fresh-res.bin");
  mapping created(fresh, lines(5), 0, o);
  EXPECT_EQ(created.stats().file_bytes_read, 0u);
  EXPECT_EQ(created.stats().bytes_to_gpu, 0u);  // nothing moved across PCIe
  EXPECT_EQ(load(created.ref<std::uint32_t>(), iota(lines(5) / 4)).values,
            std::vector<std::uint32_t>(lines(5) / 4, 0));
}

// A resident mapping stages its load and read_write write-back through the process's staging
// pool: its host cache pins nothing, unless a sync copies lines into it (mode::write); scratch
// data pins nothing at all. A cached mapping pins its first segment at map time.
TEST(OocResident, TheHostCachePinsNothingUnlessASyncCopiesLinesIntoIt) {
  files f;
  const std::string path = f.make("resp.bin", lines(12), 26);
  for (const mode md : {mode::read, mode::read_write, mode::volatile_data}) {
    mapping m(path, lines(12), 0, tiny(md, 12, 6));
    ASSERT_TRUE(m.resident()) << to_string(md);
    if (md != mode::read) expect_all(store(m.ref<std::uint32_t>(), {3}, {33u}), status::ok);
    m.sync();
    EXPECT_EQ(m.stats().host_cache_bytes_pinned, 0u) << to_string(md);
  }
  mapping scratch("", lines(12), 0, tiny(mode::volatile_data, 12, 6));
  EXPECT_EQ(scratch.stats().host_cache_bytes_pinned, 0u);
  mapping w(path, lines(12), 0, tiny(mode::write, 12, 6));
  EXPECT_EQ(w.stats().host_cache_bytes_pinned, 0u);
  expect_all(store(w.ref<std::uint32_t>(), {3}, {34u}), status::ok);
  w.sync();
  EXPECT_GT(w.stats().host_cache_bytes_pinned, 0u);
  w.unmap();
  mapping cached(path, lines(12), 0, tiny(mode::read, 4, 6));
  EXPECT_GT(cached.stats().host_cache_bytes_pinned, 0u);
}

// A mapping larger than a run loads and writes back in runs: read with O_DIRECT by the mapping's
// thread alone, in order, in runs of 8 MiB (7 runs here); read through the page cache by several
// workers in runs of 16 MiB (16, 16, 16 and 3), each taking turns between the two halves of its
// staging buffer. Both load every byte and write back every stored one.
TEST(OocResident, LargeMappingsMoveInRuns) {
  files f;
  constexpr std::uint64_t kLine = 1u << 20;
  const std::uint64_t size = 50 * kLine + 1000;  // 51 lines
  const std::string path = f.make("resl.bin", 52 * kLine, 27);
  auto file = read_file(path);
  std::uint32_t salt = 1;
  for (const bool direct : {true, false}) {
    mapping_options o;
    o.line_bytes = kLine;
    o.gpu_cache_bytes = 51 * kLine;
    o.host_cache_bytes = 6 * kLine;
    o.direct_io = direct;
    mapping m(path, size, 0, o);
    ASSERT_TRUE(m.resident());
    ASSERT_EQ(m.direct_io(), direct);  // the disk takes O_DIRECT
    EXPECT_EQ(m.stats().bytes_to_gpu, 51 * kLine);
    EXPECT_EQ(m.stats().file_bytes_read, size);
    auto a = m.ref<std::uint32_t>();
    std::vector<std::uint64_t> idx;
    for (std::uint64_t i = 0; i < a.size(); i += 4099) idx.push_back(i);
    idx.push_back(a.size() - 1);
    const auto r = load(a, idx);
    expect_all(r.st, status::ok);
    const auto words = prefix<std::uint32_t>(file, size);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      ASSERT_EQ(r.values[k], words[idx[k]]) << idx[k] << (direct ? ", O_DIRECT" : "");
    }
    std::vector<std::uint32_t> val;
    for (const std::uint64_t i : idx) {
      val.push_back(static_cast<std::uint32_t>(i * 5 + salt));
      std::memcpy(file.data() + i * 4, &val.back(), 4);
    }
    ++salt;
    expect_all(store(a, idx, val), status::ok);
    m.sync();
    EXPECT_EQ(read_file(path), file);
    EXPECT_EQ(m.stats().bytes_from_gpu, 51 * kLine);
  }
}

TEST(OocResident, OnlyWhenTheGpuCacheHoldsEveryLineAndNotTurnedOff) {
  files f;
  const std::string path = f.make("resn.bin", lines(16), 24);
  auto o = tiny(mode::read_write, 16, 6);
  EXPECT_TRUE(mapping(path, lines(16), 0, o).resident());
  EXPECT_FALSE(mapping(path, lines(16), 0, tiny(mode::read_write, 15, 6)).resident());
  o.resident = false;
  mapping m(path, lines(16), 0, o);
  EXPECT_FALSE(m.resident());
  EXPECT_EQ(load(m.ref<std::uint32_t>(), iota(lines(16) / 4)).values,
            as<std::uint32_t>(read_file(path)));
  EXPECT_EQ(m.stats().gpu_misses, 16u);  // through the cache
}

// ---- bad input ------------------------------------------------------------------------------

TEST(OocMappingErrors, MissingFileNeedsCreate) {
  files f;
  expect_error(gpm::errc::not_found, "does not exist",
               [&] { mapping m(f.disk("none.bin"), 4096, 0, tiny(mode::read_write)); });
}

TEST(OocMappingErrors, BadRangesAreRefused) {
  files f;
  const std::string path = f.make("small.bin", lines(2), 18);
  expect_error(gpm::errc::invalid_argument, "0 bytes",
               [&] { mapping m(path, 0, 0, tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "overflows", [&] {
    mapping m(path, 4096, std::numeric_limits<std::uint64_t>::max() - 100, tiny(mode::read));
  });
  expect_error(gpm::errc::invalid_argument, "past the end",
               [&] { mapping m(path, 100, lines(2), tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "fewer than",
               [&] { mapping m(path, lines(2) + 1, 0, tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "fewer than",
               [&] { mapping m(path, lines(1) + 1, lines(1), tiny(mode::read)); });
}

TEST(OocMappingErrors, SpecialFilesAreRefused) {
  files f;
  const std::string fifo = f.disk("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error(gpm::errc::invalid_argument, "is a FIFO",
               [&] { mapping m(fifo, 4096, 0, tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "is a directory",
               [&] { mapping m(f.dirs.snapshot_dir(), 4096, 0, tiny(mode::read)); });
  expect_error(gpm::errc::invalid_argument, "is a character device",
               [&] { mapping m("/dev/null", 4096, 0, tiny(mode::read)); });
}

// A NUL byte would cut a path short: mapping "x.bin\0y" must not map (or create) "x.bin".
TEST(OocMappingErrors, PathsWithANulByteAreRefused) {
  files f;
  const std::string real = f.make("x.bin", lines(4), 3);
  const std::string nul = real + std::string("\0y", 2);
  auto o = tiny(mode::read_write);
  o.create = true;
  expect_error(gpm::errc::invalid_argument, "NUL byte",
               [&] { mapping m(nul, lines(8), 0, o); });
  EXPECT_EQ(std::filesystem::file_size(real), lines(4)) << "the file before the NUL was extended";
  auto v = tiny(mode::volatile_data);
  v.spill_dir = f.dirs.snapshot_dir() + std::string("\0y", 2);
  expect_error(gpm::errc::invalid_argument, "spill_dir", [&] { mapping m("", lines(4), 0, v); });
  expect_error(gpm::errc::invalid_argument, "NUL byte",
               [&] { gpm::ooc::recover_epoch_log(nul); });
  expect_error(gpm::errc::invalid_argument, "NUL byte",
               [&] { gpm::ooc::inspect_epoch_log(nul); });
}

// Paths the system refuses, and a TMPDIR that is no directory, are gpm::errors (they were
// std::filesystem::filesystem_errors).
TEST(OocMappingErrors, PathsTheSystemRefusesAreGpmErrors) {
  files f;
  const std::string long_name = f.dirs.snapshot_dir() + "/" + std::string(300, 'n');
  auto o = tiny(mode::read_write);
  o.create = true;
  o.crash_consistent = true;
  expect_error(gpm::errc::io, "File name too long", [&] { mapping m(long_name, lines(4), 0, o); });
  struct tmpdir_set {  // TMPDIR as given for the scope, then as it was
    std::optional<std::string> saved;
    explicit tmpdir_set(const char* to) {
      if (const char* v = std::getenv("TMPDIR")) saved = v;
      setenv("TMPDIR", to, 1);
    }
    ~tmpdir_set() { saved ? setenv("TMPDIR", saved->c_str(), 1) : unsetenv("TMPDIR"); }
  } not_a_directory("/dev/null");
  // Scratch data larger than its GPU cache spills into the temporary directory.
  expect_error(gpm::errc::invalid_argument, "TMPDIR",
               [&] { mapping m("", lines(64), 0, tiny(mode::volatile_data, 4, 6)); });
}

TEST(OocMappingErrors, ReadOnlyFileCannotBeMappedForWriting) {
  files f;
  std::string path = f.make("ro.bin", 8192, 19);
  // root may write any file it can open: use a read-only file system for it.
  small_tmpfs ro(f.dirs.snapshot_dir() + "/ro", lines(16));
  if (geteuid() == 0) {
    if (!ro.mounted()) GTEST_SKIP() << "running as root without the right to mount a tmpfs";
    path = f.dirs.snapshot_dir() + "/ro/ro.bin";
    write_file(path, pattern(8192, 19));
    ASSERT_TRUE(ro.remount(MS_RDONLY, lines(16)));
  } else {
    ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  }
  for (const mode m : {mode::read_write, mode::write}) {
    expect_error(gpm::errc::io, "cannot be opened for writing",
                 [&] { mapping x(path, 8192, 0, tiny(m)); });
  }
  mapping r(path, 8192, 0, tiny(mode::read));
  EXPECT_EQ(read_lines<32>(r.ref<std::uint8_t>()).values, pattern(8192, 19));
}

TEST(OocMappingErrors, OverlappingWritersAreRefused) {
  files f;
  const std::string path = f.make("lock.bin", lines(16), 20);
  mapping w(path, lines(4), lines(4), tiny(mode::read_write));
  expect_error(gpm::errc::busy, "overlap",
               [&] { mapping m(path, lines(2), lines(5), tiny(mode::write)); });
  expect_error(gpm::errc::busy, "overlap", [&] { mapping m(path, lines(8), 0, tiny(mode::read)); });
  expect_error(gpm::errc::busy, "overlap",
               [&] { mapping m(path, lines(8), 0, tiny(mode::volatile_data)); });
  // Disjoint ranges, and readers of one range, go together.
  mapping other(path, lines(4), lines(8), tiny(mode::write));
  mapping r1(path, lines(4), 0, tiny(mode::read));
  mapping r2(path, lines(2), 0, tiny(mode::read));
  expect_error(gpm::errc::busy, "overlap",
               [&] { mapping m(path, lines(1), 0, tiny(mode::read_write)); });
}

TEST(OocMappingErrors, BadOptionsAreRefused) {
  files f;
  const std::string path = f.make("opt.bin", lines(16), 21);
  auto bad = [&](const std::string& words, auto change) {
    auto o = tiny(mode::read_write);
    change(o);
    expect_error(gpm::errc::invalid_argument, words, [&] { mapping m(path, lines(16), 0, o); });
  };
  bad("line_bytes", [](mapping_options& o) { o.line_bytes = 3000; });
  bad("line_bytes", [](mapping_options& o) { o.line_bytes = 128; });
  bad("line_bytes", [](mapping_options& o) { o.line_bytes = 4u << 20; });
  bad("io_threads", [](mapping_options& o) { o.io_threads = 0; });
  bad("queue_slots", [](mapping_options& o) { o.queue_slots = 0; });
  bad("read_ahead_run_bytes",
      [](mapping_options& o) { o.read_ahead_run_bytes = (1ull << 30) + 1; });
  bad("idle_poll_us", [](mapping_options& o) { o.idle_poll_us = 1'000'001; });
  bad("holds no line", [](mapping_options& o) { o.gpu_cache_bytes = 100; });
  bad("at least 6 lines", [](mapping_options& o) { o.host_cache_bytes = 5 * line_size(); });
  bad("create needs", [](mapping_options& o) {
    o.mode = mode::read;
    o.create = true;
  });
  bad("create needs", [](mapping_options& o) {
    o.mode = mode::volatile_data;
    o.create = true;
  });
  expect_error(gpm::errc::invalid_argument, "path is empty",
               [&] { mapping m("", 4096, 0, tiny(mode::read_write)); });
}

// A GPU cache the GPU cannot hold is out_of_memory, with the size it needs and what is free (read
// only once the allocation failed), and leaves nothing allocated: a mapping after it works.
TEST(OocMappingErrors, AGpuCacheLargerThanTheGpuIsOutOfMemory) {
  const std::uint64_t huge = lines(1ull << 31);  // 8 TiB of scratch data on the emulator
  auto o = tiny(mode::volatile_data, 1, 6);
  o.gpu_cache_bytes = huge;
  expect_error(gpm::errc::out_of_memory, "of GPU memory are free",
               [&] { mapping m("", huge, 0, o); });
  o.gpu_cache_bytes = 0;  // sized automatically: a quarter of free memory holds it whole
  mapping small("", lines(4), 0, o);
  EXPECT_TRUE(small.resident());
  expect_all(store(small.ref<std::uint32_t>(), {5}, {55u}), status::ok);
  EXPECT_EQ(load(small.ref<std::uint32_t>(), {5}).values, std::vector<std::uint32_t>{55u});
}

TEST(OocMappingErrors, ElementTypesMustFitTheMapping) {
  files f;
  const std::string path = f.make("elem.bin", lines(8), 22);
  mapping odd(path, 4098, 0, tiny(mode::read));
  expect_error(gpm::errc::invalid_argument, "whole number of 4-byte",
               [&] { odd.ref<std::uint32_t>(); });
  EXPECT_EQ(odd.ref<std::uint16_t>().size(), 2049u);
  mapping w(path, lines(2), lines(4), tiny(mode::write));
  expect_error(gpm::errc::invalid_argument, "4-byte granules", [&] { w.ref<std::uint16_t>(); });
  struct twelve {
    std::uint32_t v[3];
  };
  mapping r(path, lines(3), 0, tiny(mode::read));
  expect_error(gpm::errc::invalid_argument, "lines of " + std::to_string(line_size()),
               [&] { r.ref<twelve>(); });
}

// ---- disk full ------------------------------------------------------------------------------

TEST(OocMappingDiskFull, SyncFailsClearlyKeepsTheDataAndSucceedsLater) {
  mapped_file t("full.bin", 64, 23, tiny(mode::read_write, 64, 6));  // all lines fit the GPU
  auto a = t.m.ref<std::uint32_t>();
  const auto values = numbers(a.size(), 4);
  expect_all(write_lines<32>(a, values, access::write), status::ok);
  {
    file_size_limit limit(lines(32));  // writes past half the file fail, as on a full disk
    expect_error(gpm::errc::io, "full", [&] { t.m.sync(); });
    expect_error(gpm::errc::io, "full", [&] { t.m.sync(); });  // still kept, still failing
  }
  t.m.sync();
  EXPECT_EQ(as<std::uint32_t>(read_file(t.path)), values);
}

TEST(OocMappingDiskFull, EvictionsThatCannotBeWrittenReportIoErrorsAndLoseNothing) {
  mapped_file t("full2.bin", 16, 24, tiny(mode::read_write, 4, 6));
  auto a = t.m.ref<std::uint32_t>();
  const auto before = as<std::uint32_t>(read_file(t.path));
  std::vector<std::uint64_t> idx = iota(a.size());
  const auto values = numbers(a.size(), 8);
  std::vector<status> st;
  {
    file_size_limit limit(lines(4));
    st = store(a, idx, values);
    const auto s = t.m.stats();
    EXPECT_GT(s.gpu_io_errors, 0u);
    EXPECT_NE(s.last_io_error.find("full"), std::string::npos) << s.last_io_error;
    // The lines whose write-back failed stay in the GPU cache, dirty, and element loads (without
    // a reference) read them: a fill that could not evict publishes the line it kept again, at
    // the slot's new generation. Loads of other lines need an eviction, which fails too.
    const auto got = load(a, idx);
    std::size_t served = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (got.st[k] != status::ok) {
        EXPECT_EQ(got.st[k], status::io_error) << gpm::ooc::to_string(got.st[k]);
        continue;
      }
      ++served;
      EXPECT_EQ(got.values[k], st[k] == status::ok ? values[k] : before[k]) << k;
    }
    EXPECT_GT(served, 0u);
  }
  // What failed was not stored; what succeeded is kept. Redo the failed stores now.
  std::vector<std::uint64_t> again;
  std::vector<std::uint32_t> again_values;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    ASSERT_TRUE(st[k] == status::ok || st[k] == status::io_error) << gpm::ooc::to_string(st[k]);
    if (st[k] != status::ok) {
      again.push_back(idx[k]);
      again_values.push_back(values[k]);
    }
  }
  EXPECT_FALSE(again.empty());
  expect_all(store(a, again, again_values), status::ok);
  t.m.unmap();
  EXPECT_EQ(as<std::uint32_t>(read_file(t.path)), values);
}

TEST(OocMappingDiskFull, FullTmpfsReportsNoSpace) {
  files f;
  small_tmpfs fs(f.dirs.snapshot_dir() + "/full", lines(16));
  if (!fs.mounted()) GTEST_SKIP() << "no right to mount a tmpfs here";
  const std::string path = f.dirs.snapshot_dir() + "/full/data.bin";
  auto o = tiny(mode::write, 64, 6);
  o.create = true;  // a sparse file of 256 KiB on a 64 KiB file system
  mapping m(path, lines(64), 0, o);
  auto a = m.ref<std::uint32_t>();
  const auto values = numbers(a.size(), 6);
  expect_all(write_lines<32>(a, values, access::write), status::ok);
  expect_error(gpm::errc::io, "No space left", [&] { m.sync(); });
  ASSERT_TRUE(fs.remount(0, lines(256)));
  m.sync();
  EXPECT_EQ(as<std::uint32_t>(read_file(path)), values);
}

}  // namespace
