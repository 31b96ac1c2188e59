// gpm::pool: the API, the on-media validation and every kind of bad input (each must give a
// clear gpm::error with the right code, lose nothing and never crash).
#include <gpm/platform/checksum.hpp>
#include <gpm/pool/format.hpp>
#include <gpm/pool/object_header.hpp>
#include <gpm/pool/pool.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

namespace fmt = gpm::format::pool;
constexpr std::uint64_t kPoolBytes = 4 << 20;

class PoolTest : public ::testing::Test {
 protected:
  PoolTest() : dirs_("pool") {
    options_.pm_dir = dirs_.pm_dir();
    options_.snapshot_dir = dirs_.snapshot_dir();
    options_.notice = [this](const std::string& n) { notices_.push_back(n); };
  }

  gpm::pool make(const std::string& name = "p.pool", std::uint64_t bytes = kPoolBytes) {
    return gpm::pool::create(name, bytes, "test-layout", options_);
  }
  gpm::pool reopen(const std::string& name = "p.pool") {
    return gpm::pool::open(name, "test-layout", options_);
  }
  std::string file(const std::string& name = "p.pool") const { return dirs_.pool_path(name); }

  std::vector<char> read_file(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }
  void write_file(const std::string& path, const std::vector<char>& bytes) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  void flip_bit(const std::string& path, std::uint64_t offset, int bit) const {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ (1 << bit));
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  // Expects `f` to throw gpm::error with `code` and a message containing `part`.
  template <class F>
  void expect_error(F&& f, gpm::errc code, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "expected gpm::error(" << gpm::to_string(code) << ")";
    } catch (const gpm::error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message: " << e.what() << "\nshould mention: " << part;
    }
  }

  gpm::test::scratch_dirs dirs_;
  gpm::pool_options options_;
  std::vector<std::string> notices_;
};

TEST_F(PoolTest, CreateWriteCloseReopen) {
  {
    gpm::pool p = make();
    EXPECT_EQ(p.size(), kPoolBytes);
    EXPECT_EQ(p.path(), file());
    const std::uint64_t a = p.allocate("alpha", 1000);
    const std::uint64_t b = p.allocate("beta", 70000, 4096, 42);
    std::memset(p.host_ptr<char>(a), 0x11, 1000);
    std::memset(p.host_ptr<char>(b), 0x22, 70000);
    p.set_root(b, 70000);
    EXPECT_TRUE(p.was_clean_shutdown());
  }
  gpm::pool p = reopen();
  EXPECT_TRUE(p.was_clean_shutdown());
  const gpm::pool_object a = p.get("alpha");
  const gpm::pool_object b = p.get("beta");
  EXPECT_EQ(a.bytes, 1000u);
  EXPECT_EQ(b.bytes, 70000u);
  EXPECT_EQ(b.alignment, 4096u);
  EXPECT_EQ(b.type_tag, 42u);
  EXPECT_EQ(b.offset % 4096, 0u);
  EXPECT_EQ(p.root(), std::make_pair(b.offset, std::uint64_t{70000}));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p.host_ptr<char>(a.offset)[i], 0x11);
  for (int i = 0; i < 70000; ++i) ASSERT_EQ(p.host_ptr<char>(b.offset)[i], 0x22);
  const gpm::pool_info info = p.info();
  EXPECT_EQ(info.layout, "test-layout");
  EXPECT_EQ(info.objects, 2u);
  EXPECT_EQ(info.major, fmt::kKind.major);
  EXPECT_EQ(info.open_count, 2u);
  EXPECT_EQ(info.uuid.size(), 36u);
  EXPECT_EQ(p.durability(), gpm::durability::process_crash);
  EXPECT_TRUE(notices_.empty()) << notices_.front();
}

TEST_F(PoolTest, ObjectsAreZeroedAlignedAndDisjoint) {
  gpm::pool p = make();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  const std::uint64_t aligns[] = {128, 256, 4096, 65536};
  for (int i = 0; i < 12; ++i) {
    const std::uint64_t align = aligns[i % 4];
    const std::uint64_t bytes = 100 + 3000 * static_cast<std::uint64_t>(i);
    const std::uint64_t off = p.allocate("o" + std::to_string(i), bytes, align);
    EXPECT_EQ(off % align, 0u);
    const char* data = p.host_ptr<char>(off);
    for (std::uint64_t k = 0; k < bytes; ++k) ASSERT_EQ(data[k], 0) << "object " << i;
    std::memset(p.host_ptr<char>(off), 0xff, bytes);
    spans.emplace_back(off, off + bytes);
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  const auto objs = p.objects();
  ASSERT_EQ(objs.size(), 12u);
  for (std::size_t i = 1; i < objs.size(); ++i) EXPECT_LT(objs[i - 1].offset, objs[i].offset);
}

TEST_F(PoolTest, FreeReturnsSpaceAndReusedSpaceIsZeroed) {
  gpm::pool p = make();
  const std::uint64_t free0 = p.info().free_bytes;
  const std::uint64_t off = p.allocate("big", 1 << 20);
  std::memset(p.host_ptr<char>(off), 0x5a, 1 << 20);
  EXPECT_EQ(p.info().free_bytes, free0 - (1 << 20));
  p.free("big");
  EXPECT_EQ(p.info().free_bytes, free0);
  EXPECT_FALSE(p.find("big"));
  const std::uint64_t again = p.allocate("again", 1 << 20);
  EXPECT_EQ(again, off);
  for (int i = 0; i < (1 << 20); ++i) ASSERT_EQ(p.host_ptr<char>(again)[i], 0);
  expect_error([&] { p.free("big"); }, gpm::errc::not_found, "big");
  expect_error([&] { p.get("nothing"); }, gpm::errc::not_found, "nothing");
}

// A module's handle claims its object: a second handle in the process is refused (busy), and
// so is freeing it, until the claim is gone, even after the pool was closed.
TEST_F(PoolTest, ClaimsKeepTwoHandlesOffOneObject) {
  gpm::pool p = make();
  p.allocate("heap", 4096);
  expect_error([&] { p.claim("missing", "a test"); }, gpm::errc::not_found, "missing");
  {
    gpm::object_claim first = p.claim("heap", "a tx_heap");
    expect_error([&] { p.claim("heap", "a gphash"); }, gpm::errc::busy, "as a tx_heap");
    expect_error([&] { p.free("heap"); }, gpm::errc::busy, "destroy that handle");
    const gpm::object_claim moved = std::move(first);  // the claim moves with the handle
    expect_error([&] { p.claim("heap", "a gphash"); }, gpm::errc::busy, "heap");
  }
  {
    const gpm::object_claim again = p.claim("heap", "a tx_heap");  // the last one was released
    p.close();
  }  // a claim that outlives its pool is released harmlessly
  gpm::pool q = reopen();
  const gpm::object_claim c = q.claim("heap", "a tx_heap");  // claims are not stored in the pool
  expect_error([&] { q.free("heap"); }, gpm::errc::busy, "heap");
}

TEST_F(PoolTest, OpenObjectFindsAndValidatesAModulesStructure) {
  constexpr gpm::format::object_kind kThing{
      "test thing", {'G', 'P', 'M', 'T', 'H', 'N', 'G', '\0'}, 1, 0, 64};
  constexpr gpm::format::object_kind kOther{
      "other thing", {'G', 'P', 'M', 'O', 'T', 'H', 'R', '\0'}, 1, 0, 64};
  gpm::pool p = make();
  const std::uint64_t off = p.allocate("thing", 4096);
  expect_error([&] { p.open_object("thing", kThing, "test thing 'thing'"); }, gpm::errc::corrupt,
               "test thing 'thing': ");  // allocated, never written: creation interrupted
  gpm::format::object_header h = gpm::format::make_header(kThing, 4096);
  gpm::format::seal_header(&h);
  std::memcpy(p.host_ptr<char>(off), &h, sizeof h);
  const gpm::pool_object o = p.open_object("thing", kThing, "test thing 'thing'");
  EXPECT_EQ(o.offset, off);
  EXPECT_EQ(o.bytes, 4096u);
  expect_error([&] { p.open_object("thing", kOther, "other thing 'thing'"); }, gpm::errc::corrupt,
               "other thing 'thing': ");
  expect_error([&] { p.open_object("missing", kThing, "test thing 'missing'"); },
               gpm::errc::not_found,
               "test thing 'missing' does not exist (no object named 'missing')");
}

TEST_F(PoolTest, NamesAreValidated) {
  gpm::pool p = make();
  p.allocate("x", 8);
  expect_error([&] { p.allocate("x", 8); }, gpm::errc::already_exists, "\"x\"");
  expect_error([&] { p.allocate(std::string(64, 'n'), 8); }, gpm::errc::invalid_argument,
               "at most 63");
  p.allocate(std::string(63, 'n'), 8);  // the longest name allowed
  expect_error([&] { p.allocate("", 8); }, gpm::errc::invalid_argument, "empty");
  expect_error([&] { p.allocate("zero", 0); }, gpm::errc::invalid_argument, "0 bytes");
  expect_error([&] { p.allocate("odd", 8, 100); }, gpm::errc::invalid_argument, "power of two");
  expect_error([&] { p.allocate("small", 8, 64); }, gpm::errc::invalid_argument, "128");
}

TEST_F(PoolTest, FullPoolAndFullDirectoryAreClearErrors) {
  gpm::pool p = make();
  const std::uint64_t heap = p.info().free_bytes;
  p.allocate("most", heap - 8192);
  expect_error([&] { p.allocate("too-big", 16384); }, gpm::errc::out_of_memory, "is full");
  p.allocate("fits", 8192);  // the rest still fits exactly
  EXPECT_EQ(p.info().free_bytes, 0u);

  options_.directory_capacity = 3;
  gpm::pool q = make("small-dir.pool");
  q.allocate("a", 8);
  q.allocate("b", 8);
  q.allocate("c", 8);
  expect_error([&] { q.allocate("d", 8); }, gpm::errc::out_of_memory, "capacity");
}

// Sizes near 2^64 used to wrap around when rounded to the alignment: allocate reported success
// with an extent overlapping another object, and the pool could no longer be opened.
TEST_F(PoolTest, HugeAllocationsAreRefusedWithoutWrappingAround) {
  gpm::pool p = make();
  p.allocate("first", 4096);
  const std::uint64_t heap = p.info().heap_bytes;
  for (const std::uint64_t bytes :
       {~std::uint64_t{0}, ~std::uint64_t{0} - 100, std::uint64_t{1} << 63, heap + 1}) {
    for (const std::uint64_t alignment : {std::uint64_t{128}, std::uint64_t{1} << 30}) {
      expect_error([&] { p.allocate("huge", bytes, alignment); }, gpm::errc::out_of_memory,
                   "cannot hold");
    }
  }
  EXPECT_FALSE(p.find("huge"));
  EXPECT_EQ(p.objects().size(), 1u);
  p.close();
  EXPECT_TRUE(gpm::pool::check("p.pool", options_).ok);
  EXPECT_TRUE(reopen().find("first"));
}

TEST_F(PoolTest, CreateValidatesItsArguments) {
  expect_error([&] { make("a.pool", kPoolBytes + 100); }, gpm::errc::invalid_argument,
               "multiple of the page size");
  expect_error([&] { make("a.pool", 8192); }, gpm::errc::invalid_argument, "below");
  expect_error([&] { gpm::pool::create("a.pool", kPoolBytes, std::string(64, 'l'), options_); },
               gpm::errc::invalid_argument, "layout name");
  expect_error([&] { gpm::pool::create("a.pool", kPoolBytes, "", options_); },
               gpm::errc::invalid_argument, "empty");
  // A NUL byte would cut the path short: "a.pool\0x" must not create (or open, or remove)
  // "a.pool". The same for the directories.
  const std::string nul_name("a.pool\0x", 8);
  expect_error([&] { gpm::pool::create(nul_name, kPoolBytes, "test-layout", options_); },
               gpm::errc::invalid_argument, "NUL byte at 6");
  expect_error([&] { gpm::pool::open(nul_name, "test-layout", options_); },
               gpm::errc::invalid_argument, "NUL byte");
  expect_error([&] { gpm::pool::remove(nul_name, options_); }, gpm::errc::invalid_argument,
               "NUL byte");
  gpm::pool_options nul_dir = options_;
  nul_dir.pm_dir += std::string("\0sub", 4);
  expect_error([&] { gpm::pool::create("a.pool", kPoolBytes, "test-layout", nul_dir); },
               gpm::errc::invalid_argument, "pm_dir");
  nul_dir = options_;
  nul_dir.snapshot_dir += std::string("\0sub", 4);
  expect_error([&] { gpm::pool::create("a.pool", kPoolBytes, "test-layout", nul_dir); },
               gpm::errc::invalid_argument, "snapshot_dir");
  // A name longer than the file system allows: a gpm::error (it was a
  // std::filesystem::filesystem_error), from every call that examines the path.
  const std::string long_name(300, 'n');
  expect_error([&] { make(long_name); }, gpm::errc::io, "File name too long");
  expect_error([&] { gpm::pool::open(long_name, "test-layout", options_); }, gpm::errc::io,
               "cannot examine");
  expect_error([&] { gpm::pool::remove(long_name, options_); }, gpm::errc::io, "cannot examine");
  expect_error([&] { gpm::pool::restore(long_name, options_); }, gpm::errc::io, "cannot examine");
  EXPECT_FALSE(std::filesystem::exists(file("a.pool"))) << "a failed create left a file behind";
  make();
  expect_error([&] { make(); }, gpm::errc::already_exists, "already exists");
}

// A create killed before its pool got its name leaves ".NAME.creating.PID"; the next create in
// the directory removes those whose process is gone, and only those.
TEST_F(PoolTest, CreateRemovesTemporaryFilesOfKilledCreates) {
  std::filesystem::create_directories(dirs_.pm_dir());
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string stale = file(".x.pool.creating." + std::to_string(dead));
  const std::string running = file(".y.pool.creating.1");  // init: always running
  const std::string unrelated = file(".z.creating.notapid");
  for (const std::string& f : {stale, running, unrelated}) write_file(f, std::vector<char>(64));
  make();
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(running));
  EXPECT_TRUE(std::filesystem::exists(unrelated));
}

TEST_F(PoolTest, DiskDirectoryIsRefusedWithAnExplanation) {
  struct statfs fs {};
  const std::string disk = dirs_.snapshot_dir();  // /var/tmp: a disk file system on our machines
  ASSERT_EQ(statfs(disk.c_str(), &fs), 0);
  if (static_cast<long>(fs.f_type) == 0x01021994) GTEST_SKIP() << disk << " is tmpfs here";
  expect_error([&] { gpm::pool::create(disk + "/d.pool", kPoolBytes, "t", options_); },
               gpm::errc::unsupported, "tmpfs");
  EXPECT_FALSE(std::filesystem::exists(disk + "/d.pool"));
}

TEST_F(PoolTest, WrongLayoutIsRefused) {
  make();
  expect_error([&] { gpm::pool::open("p.pool", "other", options_); }, gpm::errc::layout_mismatch,
               "\"test-layout\"");
}

TEST_F(PoolTest, MissingPoolWithoutSnapshotIsNotFound) {
  expect_error([&] { reopen("absent.pool"); }, gpm::errc::not_found, "does not exist");
}

// Rewrites the header with `edit` applied and a correct checksum: a well-formed header with
// content this gpmkit must refuse.
void forge_header(const std::string& path, void (*edit)(fmt::header&)) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  std::vector<char> page(fmt::kPageBytes);
  f.read(page.data(), static_cast<std::streamsize>(page.size()));
  edit(*reinterpret_cast<fmt::header*>(page.data()));
  gpm::format::seal_header(page.data());
  f.seekp(0);
  f.write(page.data(), static_cast<std::streamsize>(page.size()));
}

TEST_F(PoolTest, NewerFormatVersionIsRefused) {
  make();
  forge_header(file(), [](fmt::header& h) { h.common.major = fmt::kKind.major + 1; });
  expect_error([&] { reopen(); }, gpm::errc::version, "upgrade gpmkit");
}

// A pool of another format version was reported as "inconsistent"; it is one this gpmkit cannot
// examine.
TEST_F(PoolTest, CheckOfANewerFormatVersionIsAFailureToExamineNotAnInconsistency) {
  make().close();
  forge_header(file(), [](fmt::header& h) { h.common.major = fmt::kKind.major + 1; });
  const gpm::pool_check c = gpm::pool::check("p.pool", options_);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.failure, gpm::errc::version);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("newer than this gpmkit reads"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find(file()), std::string::npos) << c.problems[0];
}

TEST_F(PoolTest, OlderFormatVersionIsRefusedSayingWhatToDo) {
  make();
  forge_header(file(), [](fmt::header& h) { h.common.major = 1; });
  expect_error([&] { reopen(); }, gpm::errc::version, "written in format version 1.0, older");
}

TEST_F(PoolTest, UnknownIncompatibleFeatureIsRefused) {
  make();
  forge_header(file(), [](fmt::header& h) { h.common.incompat_features = 1ull << 40; });
  expect_error([&] { reopen(); }, gpm::errc::version, "features");
}

TEST_F(PoolTest, AnEmptyLayoutNameIsCorrupt) {
  make();
  forge_header(file(), [](fmt::header& h) { std::memset(h.layout, 0, sizeof h.layout); });
  const gpm::pool_check c = gpm::pool::check("p.pool", options_);
  EXPECT_FALSE(c.ok);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems.front().find("layout name is empty"), std::string::npos)
      << c.problems.front();
}

// Rewrites both root records with `edit` applied and valid checksums.
void forge_roots(const std::string& path, void (*edit)(fmt::root_record&)) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  for (int slot = 0; slot < 2; ++slot) {
    fmt::root_record r;
    const auto at = static_cast<std::streamoff>(fmt::kRootOffset + slot * fmt::kRootSlotBytes);
    f.seekg(at);
    f.read(reinterpret_cast<char*>(&r), sizeof r);
    edit(r);
    r.checksum = gpm::checksum64(&r, offsetof(fmt::root_record, checksum), r.seq);
    f.seekp(at);
    f.write(reinterpret_cast<const char*>(&r), sizeof r);
  }
}

// A root that points outside the pool used to pass check; a program following it then faulted.
TEST_F(PoolTest, ARootRecordPointingOutsideThePoolIsCorrupt) {
  make().close();
  forge_roots(file(), [](fmt::root_record& r) {
    r.user_root_offset = kPoolBytes - 64;
    r.user_root_bytes = 1 << 20;
  });
  gpm::pool_check c = gpm::pool::check("p.pool", options_);
  EXPECT_FALSE(c.ok);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems.front().find("outside the pool"), std::string::npos) << c.problems.front();
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "application root");
  forge_roots(file(), [](fmt::root_record& r) {
    r.user_root_offset = ~std::uint64_t{0};
    r.user_root_bytes = 2;  // offset + bytes wraps around
  });
  EXPECT_FALSE(gpm::pool::check("p.pool", options_).ok);
  forge_roots(file(), [](fmt::root_record& r) {
    r.user_root_offset = 0;
    r.user_root_bytes = 0;
    r.pending = fmt::op_free;
    r.pending_entry = 1u << 20;
  });
  c = gpm::pool::check("p.pool", options_);
  EXPECT_FALSE(c.ok);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems.front().find("pending entry"), std::string::npos) << c.problems.front();
}

TEST_F(PoolTest, TruncatedAndExtendedFilesAreCorrupt) {
  make();
  std::vector<char> bytes = read_file(file());
  bytes.resize(bytes.size() - 4096);
  write_file(file(), bytes);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "truncated");
  bytes.resize(kPoolBytes + 4096);
  write_file(file(), bytes);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "extended");
  bytes.resize(100);
  write_file(file(), bytes);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "too short");
  write_file(file(), {});
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "empty");
}

TEST_F(PoolTest, ForeignFileIsNotAPool) {
  std::filesystem::create_directories(dirs_.pm_dir());
  std::vector<char> text(kPoolBytes, 'x');
  write_file(file("text.pool"), text);
  expect_error([&] { reopen("text.pool"); }, gpm::errc::corrupt, "not a gpmkit pool");
}

TEST_F(PoolTest, FlippedHeaderBitIsDetected) {
  make();
  flip_bit(file(), offsetof(gpm::format::object_header, object_bytes) + 1, 3);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "header checksum");
  flip_bit(file(), offsetof(gpm::format::object_header, object_bytes) + 1, 3);
  flip_bit(file(), 3000, 0);  // unused bytes of the header page are covered too
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "header checksum");
}

TEST_F(PoolTest, CorruptNewestRootFallsBackToTheOtherWithANotice) {
  {
    gpm::pool p = make();
    p.allocate("kept", 4096);
  }
  // Find the newest slot by reading both.
  std::vector<char> bytes = read_file(file());
  fmt::root_record r0, r1;
  std::memcpy(&r0, bytes.data() + fmt::kRootOffset, sizeof r0);
  std::memcpy(&r1, bytes.data() + fmt::kRootOffset + fmt::kRootSlotBytes, sizeof r1);
  const int newest = r0.seq > r1.seq ? 0 : 1;
  flip_bit(file(), fmt::kRootOffset + newest * fmt::kRootSlotBytes + 20, 1);
  {
    gpm::pool p = reopen();
    EXPECT_TRUE(p.find("kept"));
    ASSERT_FALSE(notices_.empty());
    EXPECT_NE(notices_.front().find("root record slot"), std::string::npos) << notices_.front();
  }
  // Both slots bad: nothing to trust.
  flip_bit(file(), fmt::kRootOffset + 12, 2);
  flip_bit(file(), fmt::kRootOffset + fmt::kRootSlotBytes + 12, 2);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "root record");
}

TEST_F(PoolTest, FlippedDirectoryEntryIsDetected) {
  {
    gpm::pool p = make();
    p.allocate("first", 4096);
    p.allocate("second", 4096);
  }
  flip_bit(file(), fmt::kDirectoryOffset + offsetof(fmt::directory_entry, bytes), 4);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "directory entry 0");
  flip_bit(file(), fmt::kDirectoryOffset + offsetof(fmt::directory_entry, bytes), 4);
  flip_bit(file(), fmt::kDirectoryOffset + 7 * fmt::kEntryBytes + 5, 0);  // a free entry
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "directory entry 7");
  const gpm::pool_check c = gpm::pool::check("p.pool", options_);
  EXPECT_FALSE(c.ok);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems.front().find("directory entry 7"), std::string::npos);
}

TEST_F(PoolTest, OneWriterAtATime) {
  gpm::pool p = make();
  expect_error([&] { reopen(); }, gpm::errc::busy, "open for writing");
  gpm::pool_options ro = options_;
  ro.read_only = true;
  expect_error([&] { gpm::pool::open("p.pool", "test-layout", ro); }, gpm::errc::busy,
               "open for writing");
  p.close();
  gpm::pool r1 = gpm::pool::open("p.pool", "test-layout", ro);
  gpm::pool r2 = gpm::pool::open("p.pool", "test-layout", ro);  // readers share
  expect_error([&] { r1.allocate("w", 8); }, gpm::errc::invalid_argument, "read-only");
  expect_error([&] { reopen(); }, gpm::errc::busy, "open for writing");
}

// A holder that is running is reported at once; only a lock no running process accounts for (a
// killed process's GPU context being torn down) is waited for, up to 3 s. Every "busy" used to
// take 3 s.
TEST_F(PoolTest, ABusyPoolIsReportedAtOnce) {
  gpm::pool p = make();
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { reopen(); }, gpm::errc::busy, "open for writing");
  expect_error([&] { gpm::pool::remove("p.pool", options_); }, gpm::errc::busy, "open");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(PoolTest, ClosedPoolRefusesUse) {
  gpm::pool p = make();
  p.close();
  EXPECT_FALSE(p.is_open());
  expect_error([&] { p.allocate("x", 8); }, gpm::errc::invalid_argument, "closed");
}

TEST_F(PoolTest, KernelsSeeThePoolThroughRef) {
  gpm::pool p = make();
  EXPECT_TRUE(p.mapped_into_gpu());
  const gpm::pool_ref host = p.host_ref();
  const gpm::pool_ref dev = p.ref();
  EXPECT_EQ(dev.bytes, kPoolBytes);
  EXPECT_TRUE(host.contains(4096, kPoolBytes - 4096));
  EXPECT_FALSE(host.contains(4096, kPoolBytes));
  const std::uint64_t off = p.allocate("data", 256);
  EXPECT_EQ(host.offset_of(host.ptr<char>(off)), off);
}

#if GPM_BACKEND_HOST
TEST_F(PoolTest, WithoutAGpuThePoolIsHostOnlyWithANotice) {
  ::setenv("GPM_EMU_HIDE_DEVICE", "1", 1);
  {
    gpm::pool p = make();
    EXPECT_FALSE(p.mapped_into_gpu());
    ASSERT_EQ(notices_.size(), 1u);
    EXPECT_NE(notices_[0].find("no GPU"), std::string::npos) << notices_[0];
    expect_error([&] { p.ref(); }, gpm::errc::no_device, "not mapped into a GPU");
    const std::uint64_t off = p.allocate("host-only", 64);
    p.host_ptr<int>(off)[0] = 7;  // host access still works
    gpm::pool_options strict = options_;
    strict.gpu = gpm::gpu_mapping::required;
    expect_error([&] { gpm::pool::create("strict.pool", kPoolBytes, "t", strict); },
                 gpm::errc::no_device, "mapped into a GPU");
  }
  ::unsetenv("GPM_EMU_HIDE_DEVICE");
  gpm::pool p = reopen();
  EXPECT_TRUE(p.mapped_into_gpu());
  EXPECT_EQ(p.host_ptr<int>(p.get("host-only").offset)[0], 7);
}
#endif

TEST_F(PoolTest, CheckReportsAHealthyPool) {
  {
    gpm::pool p = make();
    p.allocate("a", 100);
  }
  const gpm::pool_check c = gpm::pool::check("p.pool", options_);
  EXPECT_TRUE(c.ok);
  EXPECT_TRUE(c.problems.empty());
  ASSERT_TRUE(c.info);
  EXPECT_EQ(c.info->objects, 1u);
  EXPECT_TRUE(c.info->clean_shutdown);
}

TEST_F(PoolTest, RemoveDeletesOnlyAClosedPool) {
  gpm::pool p = make();
  expect_error([&] { gpm::pool::remove("p.pool", options_); }, gpm::errc::busy, "open");
  p.close();
  gpm::pool::remove("p.pool", options_);
  EXPECT_FALSE(std::filesystem::exists(file()));
  expect_error([&] { gpm::pool::remove("p.pool", options_); }, gpm::errc::not_found, "not exist");
}

TEST_F(PoolTest, RemoveRefusesWhatIsNotAPool) {
  std::filesystem::create_directories(dirs_.pm_dir());
  write_file(file("notes.txt"), std::vector<char>(100, 'x'));
  expect_error([&] { gpm::pool::remove("notes.txt", options_); }, gpm::errc::invalid_argument,
               "not a gpmkit pool");
  EXPECT_TRUE(std::filesystem::exists(file("notes.txt")));
  write_file(file("empty"), {});
  expect_error([&] { gpm::pool::remove("empty", options_); }, gpm::errc::invalid_argument,
               "not a gpmkit pool");
  EXPECT_TRUE(std::filesystem::exists(file("empty")));

  ASSERT_EQ(::mkfifo(file("fifo").c_str(), 0600), 0);
  expect_error([&] { gpm::pool::remove("fifo", options_); }, gpm::errc::invalid_argument, "FIFO");
  EXPECT_TRUE(std::filesystem::exists(file("fifo")));
  std::filesystem::create_directories(file("dir"));
  expect_error([&] { gpm::pool::remove("dir", options_); }, gpm::errc::invalid_argument,
               "a directory");
  EXPECT_TRUE(std::filesystem::exists(file("dir")));
  expect_error([&] { gpm::pool::remove("/dev/null", options_); }, gpm::errc::unsupported,
               "device node");
  EXPECT_TRUE(std::filesystem::exists("/dev/null"));

  make();
  std::filesystem::create_symlink(file(), file("link"));
  expect_error([&] { gpm::pool::remove("link", options_); }, gpm::errc::invalid_argument,
               "symbolic link");
  EXPECT_TRUE(std::filesystem::exists(file("link")));
  EXPECT_TRUE(std::filesystem::exists(file()));
  // A damaged pool (its magic intact) is still a pool and can be removed.
  flip_bit(file(), 100, 0);
  gpm::pool::remove("p.pool", options_);
  EXPECT_FALSE(std::filesystem::exists(file()));
}

// A FIFO would block open() until a writer came; a directory used to fail at mmap with "No such
// device". Both are refused at once, by every entry point, saying what the path is.
TEST_F(PoolTest, SpecialFilesAreRefusedAtOnce) {
  std::filesystem::create_directories(dirs_.pm_dir());
  ASSERT_EQ(::mkfifo(file("fifo").c_str(), 0600), 0);
  std::filesystem::create_directories(file("dir"));
  for (const auto& [name, what] : {std::pair{"fifo", "FIFO"}, std::pair{"dir", "a directory"}}) {
    const gpm::pool_check c = gpm::pool::check(name, options_);
    EXPECT_FALSE(c.ok);
    ASSERT_EQ(c.failure, gpm::errc::invalid_argument) << name;
    ASSERT_FALSE(c.problems.empty());
    EXPECT_NE(c.problems.front().find(what), std::string::npos) << c.problems.front();
    expect_error([&] { gpm::pool::open(name, "test-layout", options_); },
                 gpm::errc::invalid_argument, what);
    gpm::pool_options ro = options_;
    ro.read_only = true;
    expect_error([&] { gpm::pool::open(name, "test-layout", ro); }, gpm::errc::invalid_argument,
                 what);
    expect_error([&] { gpm::pool::restore(name, options_); }, gpm::errc::invalid_argument, what);
  }
}

TEST_F(PoolTest, RemoveWithSnapshotRemovesOnlySnapshotFiles) {
  {
    gpm::pool p = make();
    p.snapshot();
  }
  const std::string snap = gpm::pool::snapshot_location("p.pool", options_);
  write_file(snap + "/mine.txt", std::vector<char>(10, 'm'));
  expect_error([&] { gpm::pool::remove("p.pool", options_, true); }, gpm::errc::invalid_argument,
               "mine.txt");
  EXPECT_TRUE(std::filesystem::exists(snap + "/mine.txt"));
  EXPECT_TRUE(std::filesystem::exists(snap + "/manifest")) << "nothing may be removed";
  EXPECT_TRUE(std::filesystem::exists(file())) << "nothing may be removed";
  std::filesystem::remove(snap + "/mine.txt");
  gpm::pool::remove("p.pool", options_, true);
  EXPECT_FALSE(std::filesystem::exists(snap));
  EXPECT_FALSE(std::filesystem::exists(file()));
}

// ---- snapshots ------------------------------------------------------------------------------

TEST_F(PoolTest, SnapshotsWriteOnlyChangedPages) {
  gpm::pool p = make();
  const std::uint64_t off = p.allocate("data", 1 << 20, 4096);
  std::memset(p.host_ptr<char>(off), 1, 1 << 20);
  const gpm::snapshot_result first = p.snapshot();
  EXPECT_EQ(first.seq, 1u);
  EXPECT_EQ(first.pages_changed, kPoolBytes / 4096);
  EXPECT_GE(first.bytes_written, kPoolBytes);
  // Change 3 data pages: the snapshot writes those and nothing else.
  for (int page : {0, 17, 200}) p.host_ptr<char>(off)[page * 4096 + 5] = 9;
  const gpm::snapshot_result second = p.snapshot();
  EXPECT_EQ(second.seq, 2u);
  EXPECT_EQ(second.pages_changed, 3u);
  EXPECT_EQ(p.info().last_snapshot_seq, 2u);
  // Journal plus in-place write: about two copies of each changed page, never the whole pool.
  EXPECT_LE(second.bytes_written, 2 * second.pages_changed * 4096 + 4096)
      << "bytes written must follow the pages changed";
  // Nothing changed since: no new snapshot.
  const gpm::snapshot_result third = p.snapshot();
  EXPECT_EQ(third.pages_changed, 0u);
  EXPECT_EQ(third.seq, 2u);
  EXPECT_EQ(third.bytes_written, 0u);
}

TEST_F(PoolTest, MissingPoolIsRestoredFromItsSnapshot) {
  {
    gpm::pool p = make();
    const std::uint64_t off = p.allocate("data", 8192);
    std::strcpy(p.host_ptr<char>(off), "survives a reboot");
    p.snapshot();
    std::strcpy(p.host_ptr<char>(off), "lost: written after the snapshot");
  }
  std::filesystem::remove(file());  // what a reboot does to tmpfs
  gpm::pool p = reopen();
  EXPECT_STREQ(p.host_ptr<char>(p.get("data").offset), "survives a reboot");
  ASSERT_FALSE(notices_.empty());
  EXPECT_NE(notices_.front().find("restored snapshot 1"), std::string::npos) << notices_.front();
  EXPECT_FALSE(p.was_clean_shutdown()) << "a restored pool must run recovery";
}

TEST_F(PoolTest, CorruptPoolIsMovedAsideAndRestored) {
  {
    gpm::pool p = make();
    p.allocate("data", 8192);
    p.snapshot();
  }
  flip_bit(file(), 100, 0);
  gpm::pool p = reopen();
  EXPECT_TRUE(p.find("data"));
  ASSERT_FALSE(notices_.empty());
  EXPECT_NE(notices_.front().find("was corrupt"), std::string::npos) << notices_.front();
  int aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(dirs_.pm_dir())) {
    aside += e.path().filename().string().find(".corrupt.") != std::string::npos;
  }
  EXPECT_EQ(aside, 1) << "the damaged file must be kept, not deleted";
}

TEST_F(PoolTest, CreateRefusesToShadowASnapshot) {
  {
    gpm::pool p = make();
    p.snapshot();
  }
  gpm::pool::remove("p.pool", options_);
  expect_error([&] { make(); }, gpm::errc::already_exists, "snapshot");
  gpm::pool::remove("p.pool", options_, true);
  make();  // the snapshot is gone too
}

TEST_F(PoolTest, ExplicitRestoreReplacesThePoolFile) {
  std::uint64_t off = 0;
  {
    gpm::pool p = make();
    off = p.allocate("data", 4096);
    p.host_ptr<int>(off)[0] = 1;
    p.snapshot();
    p.host_ptr<int>(off)[0] = 2;
  }
  const gpm::snapshot_result r = gpm::pool::restore("p.pool", options_);
  EXPECT_EQ(r.seq, 1u);
  gpm::pool p = reopen();
  EXPECT_EQ(p.host_ptr<int>(off)[0], 1);
}

// Two pools of one name in different directories used to share one snapshot directory (it was
// named after the file name alone): a restore brought in the other pool's content, and two
// concurrent snapshots both became snapshot 1 of one directory. A snapshot now belongs to one
// pool path, and to one pool uuid.
TEST_F(PoolTest, SnapshotsOfPoolsNamedAlikeInDifferentDirectoriesAreSeparate) {
  gpm::pool_options other = options_;
  other.pm_dir = dirs_.pm_dir() + "/elsewhere";
  EXPECT_NE(gpm::pool::snapshot_location("same.pool", options_),
            gpm::pool::snapshot_location("same.pool", other));
  {
    gpm::pool a = gpm::pool::create("same.pool", kPoolBytes, "test-layout", options_);
    std::strcpy(a.host_ptr<char>(a.allocate("data", 4096)), "pool A");
    a.snapshot();
  }
  {
    // A's snapshot does not stop a pool of the same name elsewhere from being created.
    gpm::pool b = gpm::pool::create("same.pool", kPoolBytes, "test-layout", other);
    std::strcpy(b.host_ptr<char>(b.allocate("data", 4096)), "pool B");
  }
  // B was never snapshotted: there is nothing to restore it from, and it stays as it is.
  expect_error([&] { gpm::pool::restore("same.pool", other); }, gpm::errc::not_found,
               "no snapshot");
  {
    gpm::pool b = gpm::pool::open("same.pool", "test-layout", other);
    EXPECT_STREQ(b.host_ptr<char>(b.get("data").offset), "pool B");
  }
  // Both snapshotted at once: each is snapshot 1 of its own pool.
  gpm::snapshot_result ra, rb;
  {
    gpm::pool a = gpm::pool::open("same.pool", "test-layout", options_);
    gpm::pool b = gpm::pool::open("same.pool", "test-layout", other);
    std::strcpy(a.host_ptr<char>(a.get("data").offset), "pool A, second");
    std::thread ta([&] { ra = a.snapshot(); });
    std::thread tb([&] { rb = b.snapshot(); });
    ta.join();
    tb.join();
  }
  EXPECT_EQ(ra.seq, 2u);
  EXPECT_EQ(rb.seq, 1u);
  std::filesystem::remove(file("same.pool"));
  std::filesystem::remove(other.pm_dir + "/same.pool");
  for (const auto& [o, text] :
       {std::pair{options_, "pool A, second"}, std::pair{other, "pool B"}}) {
    gpm::pool p = gpm::pool::open("same.pool", "test-layout", o);
    EXPECT_STREQ(p.host_ptr<char>(p.get("data").offset), text);
  }
}

// A snapshot directory of an older gpmkit (named after the file name alone, manifest 2.0) may be
// another pool's: it is never used, and the error says where it is.
TEST_F(PoolTest, ASnapshotOfAnOlderGpmkitIsNamedNotUsed) {
  {
    gpm::pool p = make();
    p.snapshot();
  }
  const std::string current = gpm::pool::snapshot_location("p.pool", options_);
  const std::string older = dirs_.snapshot_dir() + "/p.pool.snapshot";
  std::filesystem::rename(current, older);
  std::filesystem::remove(file());
  expect_error([&] { reopen(); }, gpm::errc::not_found,
               older + " holds a snapshot written by an older");
  expect_error([&] { gpm::pool::restore("p.pool", options_); }, gpm::errc::not_found,
               "older gpmkit");
  // Put back under the current name, a 2.0 manifest is refused as older.
  std::filesystem::rename(older, current);
  std::fstream m(current + "/manifest", std::ios::binary | std::ios::in | std::ios::out);
  m.seekp(offsetof(gpm::format::object_header, major));
  m.put(2);
  m.close();
  expect_error([&] { reopen(); }, gpm::errc::version, "format version 2.0, older");
}

TEST_F(PoolTest, ASnapshotNeverReplacesAnotherPoolOrAFile) {
  {
    gpm::pool p = make();
    p.allocate("mine", 4096);
    p.snapshot();
  }
  // Another pool now sits at the path (copied there): its uuid is not the snapshot's.
  gpm::pool_options other = options_;
  other.pm_dir = dirs_.pm_dir() + "/elsewhere";
  gpm::pool::create("p.pool", kPoolBytes, "test-layout", other).close();
  std::filesystem::copy_file(other.pm_dir + "/p.pool", file(),
                             std::filesystem::copy_options::overwrite_existing);
  expect_error([&] { gpm::pool::restore("p.pool", options_); }, gpm::errc::already_exists,
               "another pool");
  EXPECT_TRUE(gpm::pool::check("p.pool", options_).ok) << "the pool must be left as it was";
  // Damaged but with a sound header: opening it does not bring in the snapshot of another pool.
  flip_bit(file(), fmt::kDirectoryOffset + 3 * fmt::kEntryBytes, 0);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "not restored from its snapshot");
  EXPECT_TRUE(std::filesystem::exists(file()));

  // A plain file at the path is not replaced.
  write_file(file(), std::vector<char>(kPoolBytes, 't'));
  expect_error([&] { gpm::pool::restore("p.pool", options_); }, gpm::errc::invalid_argument,
               "not a gpmkit pool");
  EXPECT_EQ(read_file(file()), std::vector<char>(kPoolBytes, 't'));
}

// Another process truncating the pool during a snapshot used to kill the snapshotting process
// with SIGBUS (the snapshot read the pool through its mapping). Now the snapshot reads the file,
// and a truncation is an error; closing the truncated pool does not touch it either.
TEST_F(PoolTest, TruncationDuringASnapshotIsAnErrorNotACrash) {
  constexpr std::uint64_t kBig = 16 << 20;
  {
    gpm::pool p = make("p.pool", kBig);
    std::filesystem::resize_file(file(), 4096);  // before: found at once
    expect_error([&] { p.snapshot(); }, gpm::errc::corrupt, "truncated");
  }
  std::filesystem::remove(file());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4; ++trial) {
    gpm::pool p = make("t.pool", kBig);
    std::memset(p.host_ptr<char>(p.allocate("data", kBig / 2)), trial + 1, kBig / 2);
    const auto delay = std::chrono::microseconds(rng() % 3000);
    std::thread truncate([&] {
      std::this_thread::sleep_for(delay);
      std::filesystem::resize_file(file("t.pool"), 8192 + 4096 * (rng() % 4));
    });
    try {
      p.snapshot();  // done before the truncation, or refused because of it
    } catch (const gpm::error& e) {
      EXPECT_EQ(e.code(), gpm::errc::corrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    }
    truncate.join();
    p.close();
    gpm::pool::remove("t.pool", options_, true);
  }
}

TEST_F(PoolTest, DamagedSnapshotIsReportedNotUsed) {
  {
    gpm::pool p = make();
    p.allocate("data", 4096);
    p.snapshot();
  }
  std::filesystem::remove(file());
  flip_bit(gpm::pool::snapshot_location("p.pool", options_) + "/image", 3 * 4096 + 77, 6);
  expect_error([&] { reopen(); }, gpm::errc::corrupt, "page 3");
  EXPECT_FALSE(std::filesystem::exists(file())) << "a failed restore left a pool file";
}

// A restore checks its pages on several threads (pools of over 1024 pages): of two damaged pages
// far apart, the first is the one named.
TEST_F(PoolTest, RestoreNamesTheFirstDamagedPage) {
  {
    gpm::pool p = make("big.pool", 32ull << 20);
    p.allocate("data", 16ull << 20);
    p.snapshot();
  }
  std::filesystem::remove(file("big.pool"));
  const std::string image = gpm::pool::snapshot_location("big.pool", options_) + "/image";
  flip_bit(image, 7000 * 4096 + 5, 1);
  flip_bit(image, 1000 * 4096 + 9, 2);
  expect_error([&] { reopen("big.pool"); }, gpm::errc::corrupt, "page 1000 (offset");
}

}  // namespace
