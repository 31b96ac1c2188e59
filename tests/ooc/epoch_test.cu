// Unit tests of crash-consistent sync (mapping_options::crash_consistent,
// include/gpm/ooc/epoch.hpp) on both backends: the file changes only at sync, read-write and
// write-only, whole and range syncs, epochs counted, recovery of a committed epoch (made by a child
// killed right after its commit) at mapping and by recover_epoch_log, ranges striped over several
// files (one log, its stripe table checked, random damage to it refused or recovered in every
// file alike), and every bad input: options,
// two writers, corrupt, truncated, foreign and transplanted epoch logs, a committed record that
// fails its checksum, a full disk while the log is written, and random damage to a committed log.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include <gpm/ooc/epoch.hpp>
#include <gpm/pool/object_header.hpp>

#include "ooc_test_util.hpp"

namespace {

using namespace gpm::test::ooc;
using gpm::ooc::mapping;
using gpm::ooc::mapping_options;

namespace fs = std::filesystem;

mapping_options consistent(mode m, std::uint64_t gpu_lines = 8, std::uint64_t host_lines = 6) {
  mapping_options o = tiny(m, gpu_lines, host_lines);
  o.crash_consistent = true;
  return o;
}

std::vector<std::uint32_t> numbers(std::size_t n, std::uint32_t salt) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(i * 2654435761u + salt);
  return v;
}

std::vector<unsigned char> bytes_of(const std::vector<std::uint32_t>& v) {
  std::vector<unsigned char> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Stores `values` to every element with element access, then reads them back through the caches.
void store_all(const gpm::ooc::array<std::uint32_t>& a, const std::vector<std::uint32_t>& values) {
  expect_all(store(a, iota(values.size()), values), status::ok);
}

// The child of the recovery tests: maps args.pool_path crash-consistently, stores numbers(salt 7)
// everywhere and syncs; started with the crash point ooc.log.committed, it dies with the epoch
// committed in the log but not written in place.
constexpr std::uint64_t kChildLines = 16;
GPM_CRASH_SCENARIO(ooc_epoch_commit_then_die) {
  mapping m(args.pool_path, lines(kChildLines), 0, consistent(mode::read_write));
  auto a = m.ref<std::uint32_t>();
  store(a, iota(a.size()), numbers(a.size(), 7));
  m.sync();
  return 0;
}

// The same over kChildLines lines striped over three files: `path` and path + ".1", ".2".
std::vector<std::string> stripes_of(const std::string& path) {
  return {path, path + ".1", path + ".2"};
}
GPM_CRASH_SCENARIO(ooc_striped_commit_then_die) {
  mapping m(stripes_of(args.pool_path), lines(kChildLines), 0, consistent(mode::read_write));
  auto a = m.ref<std::uint32_t>();
  store(a, iota(a.size()), numbers(a.size(), 7));
  m.sync();
  return 0;
}

// Runs child `scenario` on `path` until it reaches crash point `point`.
void kill_child_at(const files& f, const std::string& path, const std::string& point,
                   const char* scenario = "ooc_epoch_commit_then_die") {
  auto args = f.dirs.args("unused", 1);
  args.pool_path = path;
  const auto r = gpm::test::run_child(scenario, args, gpm::test::kill_at(point));
  EXPECT_TRUE(r.killed) << point << ": " << r.describe();
}

// A data file whose epoch log holds a committed, unapplied epoch 1 (numbers salt 7).
struct committed_file {
  files f;
  std::string path = f.make("c.bin", lines(kChildLines), 3);
  std::vector<unsigned char> before = read_file(path);
  std::vector<unsigned char> after = bytes_of(numbers(lines(kChildLines) / 4, 7));
  committed_file() { kill_child_at(f, path, "ooc.log.committed"); }
};

// ---- the file changes only at sync ----------------------------------------------------------

TEST(OocEpoch, ReadWriteChangesTheFileOnlyAtSync) {
  files f;
  const std::string path = f.make("rw.bin", lines(64), 1);
  const auto before = read_file(path);
  const auto values = numbers(lines(64) / 4, 11);
  {
    mapping m(path, lines(64), 0, consistent(mode::read_write));
    auto a = m.ref<std::uint32_t>();
    store_all(a, values);
    // 64 lines through 8 GPU and 6 host lines: most left the caches, and none reached the file.
    EXPECT_GT(m.stats().spill_bytes_written, 0u);
    EXPECT_EQ(read_file(path), before);
    const std::uint64_t read_back = m.stats().spill_bytes_read;
    const auto back = load(a, iota(values.size()));
    expect_all(back.st, status::ok);
    ASSERT_EQ(back.values, values);  // staged lines are read back from the spill file
    EXPECT_GT(m.stats().spill_bytes_read, read_back);
    m.sync();
    EXPECT_EQ(read_file(path), bytes_of(values));
    auto s = m.stats();
    EXPECT_EQ(s.epoch, 1u);
    EXPECT_EQ(s.epochs_committed, 1u);
    // The lines still in the host cache go to the log; the staged ones stay in the staging file,
    // which the records name: far fewer bytes than the 64 lines reach the log.
    EXPECT_GT(s.log_bytes_written, 0u);
    EXPECT_LT(s.log_bytes_written, lines(16));
    EXPECT_EQ(s.log_bytes_applied, lines(64));  // every changed byte, once, in place
    EXPECT_EQ(s.file_bytes_written, 0u);        // the mapped file changed only from the log
    EXPECT_EQ(fs::file_size(gpm::ooc::epoch_log_path(path)), 4096u);  // emptied after the epoch
    m.sync();                                                         // nothing changed: no epoch
    EXPECT_EQ(m.stats().epoch, 1u);
    // The file is read again after the epoch: a line changed again merges with it.
    expect_all(store(a, {0}, {42u}), status::ok);
    m.unmap();
  }
  auto expect = values;
  expect[0] = 42;
  EXPECT_EQ(read_file(path), bytes_of(expect));
  const auto info = gpm::ooc::inspect_epoch_log(path);
  EXPECT_TRUE(info.exists);
  EXPECT_EQ(info.epoch, 2u);
  EXPECT_FALSE(info.pending);
  EXPECT_EQ(info.data_file, "rw.bin");
  EXPECT_EQ(info.log_bytes, 4096u);
  mapping again(path, lines(64), 0, consistent(mode::read_write));
  EXPECT_EQ(again.last_recovery().epoch, 2u);
  EXPECT_FALSE(again.last_recovery().replayed);
  EXPECT_EQ(again.stats().epoch, 2u);
}

// The staging file gives back its blocks once an epoch has written the staged lines in place (a
// thread of the host cache punches holes, where the file system can, while the mapping goes on),
// and a line staged again is read back right after it.
TEST(OocEpoch, AnEpochGivesBackTheStagingFilesBlocks) {
  files f;
  const std::string path = f.make("punch.bin", lines(64), 4);
  mapping m(path, lines(64), 0, consistent(mode::read_write));
  auto a = m.ref<std::uint32_t>();
  const auto values = numbers(lines(64) / 4, 21);
  store_all(a, values);
  const std::uint64_t staged = m.stats().spill_bytes_held;
  EXPECT_GE(staged, lines(40)) << "64 lines through 8 GPU and 6 host lines: most were staged";
  m.sync();
  EXPECT_EQ(read_file(path), bytes_of(values));
  std::uint64_t held = m.stats().spill_bytes_held;
  for (int waited_ms = 0; held > lines(2) && waited_ms < 10000; waited_ms += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    held = m.stats().spill_bytes_held;
  }
  EXPECT_LE(held, lines(2)) << "staged " << staged << " bytes before";
  auto again = values;
  again[5] = 77;
  expect_all(store(a, {5}, {77u}), status::ok);
  store_all(a, again);  // every line through the caches again: line 0 staged anew, then reread
  const auto back = load(a, iota(again.size()));
  expect_all(back.st, status::ok);
  EXPECT_EQ(back.values, again);
  m.sync();
  EXPECT_EQ(read_file(path), bytes_of(again));
}

TEST(OocEpoch, WriteModeCommitsOnlyTheBytesWritten) {
  files f;
  const std::string path = f.make("w.bin", lines(48), 2);
  auto expect = as<std::uint32_t>(read_file(path));
  mapping m(path, lines(48), 0, consistent(mode::write));
  auto a = m.ref<std::uint32_t>();
  std::vector<std::uint64_t> idx;
  std::vector<std::uint32_t> val;
  for (std::uint64_t i = 1; i < expect.size(); i += 3) {  // sparse: read-merge-write on apply
    idx.push_back(i);
    val.push_back(static_cast<std::uint32_t>(i ^ 0x5a5a));
    expect[i] = val.back();
  }
  expect_all(store(a, idx, val), status::ok);
  // A second pass over some lines after they were staged: staged and resident runs merge.
  expect_all(store(a, {2, 5}, {7u, 8u}), status::ok);
  expect[2] = 7;
  expect[5] = 8;
  EXPECT_NE(read_file(path), bytes_of(expect));
  m.sync();
  EXPECT_EQ(read_file(path), bytes_of(expect));
  EXPECT_EQ(m.stats().epoch, 1u);
}

// A resident mapping (the GPU cache holds it whole) keeps every change in the GPU until sync(),
// which commits it as an epoch like any other: read-write every byte, write mode only those stored.
TEST(OocEpoch, ResidentMappingsCommitEpochs) {
  files f;
  const std::uint64_t size = lines(20) + 200;
  for (const mode md : {mode::read_write, mode::write}) {
    const std::string path = f.make(std::string("res-") + to_string(md), lines(21), 6);
    const auto before = read_file(path);
    auto expect = before;
    mapping m(path, size, 0, consistent(md, 21, 6));
    ASSERT_TRUE(m.resident());
    auto a = m.ref<std::uint32_t>();
    for (std::uint32_t e = 1; e <= 2; ++e) {
      std::vector<std::uint64_t> idx;
      std::vector<std::uint32_t> val;
      for (std::uint64_t i = e; i < a.size(); i += md == mode::write ? 5 : 1) {
        idx.push_back(i);
        val.push_back(static_cast<std::uint32_t>(i * 31 + e));
        std::memcpy(expect.data() + i * 4, &val.back(), 4);
      }
      expect_all(store(a, idx, val), status::ok);
      EXPECT_NE(read_file(path), expect);  // nothing reached the file before the commit
      m.sync();
      ASSERT_EQ(read_file(path), expect) << to_string(md) << " epoch " << e;
      EXPECT_EQ(m.stats().epoch, e);
    }
    m.sync();  // nothing changed: no epoch
    EXPECT_EQ(m.stats().epochs_committed, 2u);
  }
}

TEST(OocEpoch, RangeSyncCommitsOnlyItsLines) {
  files f;
  const std::string path = f.make("r.bin", lines(32), 4);
  const auto before = as<std::uint32_t>(read_file(path));
  const auto values = numbers(before.size(), 5);
  mapping m(path, lines(32), 0, consistent(mode::read_write));
  store_all(m.ref<std::uint32_t>(), values);
  m.sync(lines(4), lines(8));  // lines 4 to 11
  auto expect = before;
  const std::uint64_t per_line = line_size() / 4;
  std::copy(values.begin() + 4 * per_line, values.begin() + 12 * per_line,
            expect.begin() + 4 * per_line);
  EXPECT_EQ(read_file(path), bytes_of(expect));
  m.sync();
  EXPECT_EQ(read_file(path), bytes_of(values));
  EXPECT_EQ(m.stats().epoch, 2u);
}

TEST(OocEpoch, UnalignedRangeHasItsOwnLog) {
  files f;
  const std::uint64_t off = 1000;
  const std::string path = f.make("u.bin", off + lines(10) + 123, 6);
  auto file = read_file(path);
  const auto values = numbers(lines(10) / 4, 9);
  {
    mapping m(path, lines(10), off, consistent(mode::read_write));
    store_all(m.ref<std::uint32_t>(), values);
  }
  std::memcpy(file.data() + off, values.data(), lines(10));
  EXPECT_EQ(read_file(path), file);
  EXPECT_TRUE(fs::exists(path + "@1000.ooc-log"));
  EXPECT_EQ(gpm::ooc::inspect_epoch_log(path, off).epoch, 1u);
  EXPECT_FALSE(gpm::ooc::inspect_epoch_log(path).exists);
}

// ---- recovery -------------------------------------------------------------------------------

TEST(OocEpoch, MappingFinishesACommittedEpoch) {
  committed_file c;
  EXPECT_EQ(read_file(c.path), c.before);  // killed before the first in-place write
  const auto info = gpm::ooc::inspect_epoch_log(c.path);
  EXPECT_TRUE(info.pending);
  EXPECT_EQ(info.epoch, 1u);
  EXPECT_GE(info.records, 1u);
  EXPECT_EQ(info.record_bytes, lines(kChildLines));
  // 16 lines through 6 host lines: most were staged, and their records name them there.
  EXPECT_GE(info.staged_records, 8u);
  EXPECT_LE(info.staged_records, info.records);
  EXPECT_EQ(info.staging_path, gpm::ooc::epoch_log_path(c.path) + ".staged");
  mapping m(c.path, lines(kChildLines), 0, consistent(mode::read_write));
  EXPECT_TRUE(m.last_recovery().replayed);
  EXPECT_EQ(m.last_recovery().epoch, 1u);
  EXPECT_EQ(m.last_recovery().bytes, lines(kChildLines));
  EXPECT_EQ(read_file(c.path), c.after);
  const auto back = load(m.ref<std::uint32_t>(), iota(lines(kChildLines) / 4));
  EXPECT_EQ(bytes_of(back.values), c.after);
}

TEST(OocEpoch, AnyWritingMappingAndRecoverEpochLogFinishIt) {
  {
    committed_file c;  // a mapping without crash_consistent recovers too, before reading
    mapping m(c.path, lines(kChildLines), 0, tiny(mode::read_write));
    EXPECT_TRUE(m.last_recovery().replayed);
    EXPECT_EQ(read_file(c.path), c.after);
  }
  committed_file c;
  const auto r = gpm::ooc::recover_epoch_log(c.path);
  EXPECT_TRUE(r.replayed);
  EXPECT_EQ(r.epoch, 1u);
  EXPECT_EQ(read_file(c.path), c.after);
  const auto again = gpm::ooc::recover_epoch_log(c.path);  // idempotent
  EXPECT_FALSE(again.replayed);
  EXPECT_EQ(again.epoch, 1u);
  EXPECT_EQ(read_file(c.path), c.after);
  const auto none = gpm::ooc::recover_epoch_log(c.f.make("plain.bin", 100, 1));
  EXPECT_EQ(none.epoch, 0u);
  expect_error(gpm::errc::not_found, "missing.bin",
               [&] { gpm::ooc::recover_epoch_log(c.f.disk("missing.bin")); });
}

TEST(OocEpoch, AReadingMappingRefusesAPendingEpoch) {
  committed_file c;
  for (const mode md : {mode::read, mode::volatile_data}) {
    expect_error(gpm::errc::busy, "gpmkit ooc recover",
                 [&] { mapping m(c.path, lines(kChildLines), 0, tiny(md)); });
  }
  gpm::ooc::recover_epoch_log(c.path);
  mapping m(c.path, lines(kChildLines), 0, tiny(mode::read));
  EXPECT_EQ(m.stats().epoch, 1u);
  EXPECT_EQ(bytes_of(load(m.ref<std::uint32_t>(), iota(lines(kChildLines) / 4)).values), c.after);
}

TEST(OocEpoch, UncommittedRecordsAreDropped) {
  files f;
  const std::string path = f.make("d.bin", lines(16), 8);
  const auto before = read_file(path);
  kill_child_at(f, path, "ooc.log.written");
  const auto info = gpm::ooc::inspect_epoch_log(path);
  EXPECT_FALSE(info.pending);
  EXPECT_GT(info.discard_bytes, 0u);
  const auto rec = gpm::ooc::recover_epoch_log(path);
  EXPECT_FALSE(rec.replayed);
  EXPECT_EQ(rec.discarded_bytes, info.discard_bytes);
  EXPECT_EQ(rec.epoch, 0u);
  EXPECT_EQ(read_file(path), before);
  EXPECT_EQ(fs::file_size(gpm::ooc::epoch_log_path(path)), 4096u);
}

// ---- bad input --------------------------------------------------------------------------------

TEST(OocEpoch, OptionsItRefuses) {
  files f;
  const std::string a = f.make("a.bin", lines(8), 1);
  const std::string b = f.make("b.bin", lines(8), 2);
  for (const mode md : {mode::read, mode::volatile_data}) {
    expect_error(gpm::errc::invalid_argument, "crash_consistent needs mode::read_write",
                 [&] { mapping m(a, lines(8), 0, consistent(md)); });
  }
  EXPECT_FALSE(fs::exists(gpm::ooc::epoch_log_path(a)));
  EXPECT_FALSE(fs::exists(gpm::ooc::epoch_log_path(b)));
}

// ---- striped ranges ---------------------------------------------------------------------------

// One log beside the first file commits each epoch in all of them; it names its files, so the
// range mapped another way is refused, and so is a damaged stripe table.
TEST(OocEpoch, StripedRangesCommitEachEpochInEveryFile) {
  files f;
  const std::vector<std::string> paths = {
      f.make("s0.bin", lines(8), 1), f.make("s1.bin", lines(8), 2), f.make("s2.bin", lines(8), 3)};
  const std::uint64_t size = lines(22) + 100;  // the last line partial, in the second file
  std::vector<std::vector<unsigned char>> before;
  for (const auto& p : paths) before.push_back(read_file(p));
  const auto values = numbers(size / 4, 13);
  {
    mapping m(paths, size, 0, consistent(mode::read_write));
    store_all(m.ref<std::uint32_t>(), values);
    for (std::size_t k = 0; k < paths.size(); ++k) EXPECT_EQ(read_file(paths[k]), before[k]) << k;
    m.sync();
    EXPECT_EQ(m.stats().epoch, 1u);
  }
  std::vector<std::vector<unsigned char>> after;
  for (const auto& p : paths) after.push_back(read_file(p));
  EXPECT_EQ(gather(after, 0, size), bytes_of(values));
  auto expect = before;
  scatter(expect, 0, bytes_of(values));
  EXPECT_EQ(after, expect);  // nothing past the range's lines changed
  const auto info = gpm::ooc::inspect_epoch_log(paths[0]);
  EXPECT_EQ(info.epoch, 1u);
  ASSERT_EQ(info.stripes.size(), 3u);
  EXPECT_EQ(fs::path(info.stripes[2]).filename(), "s2.bin");
  EXPECT_EQ(info.stripe_line_bytes, line_size());
  EXPECT_FALSE(fs::exists(gpm::ooc::epoch_log_path(paths[1])));
  expect_error(gpm::errc::layout_mismatch, "3 files striped",
               [&] { mapping m(paths[0], lines(8), 0, tiny(mode::read_write)); });
  expect_error(gpm::errc::layout_mismatch, "3 files striped", [&] {
    mapping m(std::vector<std::string>{paths[0], paths[2], paths[1]}, size, 0,
              consistent(mode::read_write));
  });
  mapping again(paths, size, 0, consistent(mode::read_write));
  EXPECT_EQ(again.last_recovery().epoch, 1u);
  again.unmap();
  // A byte of the table (in the first path) flipped.
  const std::string log = gpm::ooc::epoch_log_path(paths[0]);
  auto bytes = read_file(log);
  bytes[4096 + 40] ^= 0x20;
  write_file(log, bytes);
  expect_error(gpm::errc::corrupt, "stripe table",
               [&] { mapping m(paths, size, 0, consistent(mode::read_write)); });
  expect_error(gpm::errc::corrupt, "stripe table", [&] { gpm::ooc::recover_epoch_log(paths[0]); });
}

TEST(OocEpoch, TwoWritersOfOneRangeAreRefused) {
  files f;
  const std::string path = f.make("two.bin", lines(8), 1);
  mapping m(path, lines(8), 0, consistent(mode::read_write));
  expect_error(gpm::errc::busy, "mapped already",
               [&] { mapping other(path, lines(4), lines(2), consistent(mode::write)); });
  expect_error(gpm::errc::busy, "mapped already", [&] { gpm::ooc::recover_epoch_log(path); });
}

// Maps `path` crash-consistently and expects `code` naming `words`; the log and the file must be
// left exactly as they were.
void expect_refused(const std::string& path, gpm::errc code, const std::string& words) {
  const std::string log = gpm::ooc::epoch_log_path(path);
  const auto data_before = read_file(path);
  const auto log_before = fs::is_regular_file(log) ? read_file(log) : std::vector<unsigned char>{};
  expect_error(code, words, [&] { mapping m(path, lines(8), 0, consistent(mode::read_write)); });
  expect_error(code, words, [&] { gpm::ooc::inspect_epoch_log(path); });
  EXPECT_TRUE(fs::exists(log)) << "the log was deleted";
  EXPECT_EQ(read_file(path), data_before);
  if (fs::is_regular_file(log)) {
    EXPECT_EQ(read_file(log), log_before);
  }
}

// A file of 8 lines with a fresh (epoch 0) log.
std::string logged(files& f, const std::string& name) {
  const std::string path = f.make(name, lines(8), 1);
  mapping m(path, lines(8), 0, consistent(mode::read_write));
  return path;
}

void patch(const std::string& path, std::uint64_t at, const std::vector<unsigned char>& bytes) {
  auto b = read_file(path);
  ASSERT_LE(at + bytes.size(), b.size());
  std::memcpy(b.data() + at, bytes.data(), bytes.size());
  write_file(path, b);
}

TEST(OocEpoch, CorruptTruncatedAndForeignLogsAreRefused) {
  files f;
  {
    const std::string p = logged(f, "hdr.bin");
    patch(gpm::ooc::epoch_log_path(p), 100, {0xff});  // in the header's name field
    expect_refused(p, gpm::errc::corrupt, "checksum");
  }
  {
    const std::string p = logged(f, "short.bin");
    fs::resize_file(gpm::ooc::epoch_log_path(p), 100);
    expect_refused(p, gpm::errc::corrupt, "too short");
  }
  {
    const std::string p = logged(f, "cut.bin");
    fs::resize_file(gpm::ooc::epoch_log_path(p), 2000);
    expect_refused(p, gpm::errc::corrupt, "truncated");
  }
  {
    const std::string p = f.make("foreign.bin", lines(8), 1);
    write_file(gpm::ooc::epoch_log_path(p), pattern(8192, 3));
    expect_refused(p, gpm::errc::corrupt, "not a gpm::ooc epoch log");
  }
  {
    const std::string p = logged(f, "roots.bin");
    patch(gpm::ooc::epoch_log_path(p), 1024, std::vector<unsigned char>(8, 0xee));
    patch(gpm::ooc::epoch_log_path(p), 2048, std::vector<unsigned char>(8, 0xee));
    expect_refused(p, gpm::errc::corrupt, "neither root record is valid");
  }
  {
    const std::string p = f.make("dir.bin", lines(8), 1);
    fs::create_directory(gpm::ooc::epoch_log_path(p));
    expect_refused(p, gpm::errc::corrupt, "not a regular file");
  }
}

// The range's own file must be a regular file for recovery and inspection as for mapping: a
// FIFO, a directory or a device gets an error that names what it is (before, recovery of a FIFO
// said it "holds 0 bytes", and opening one for writing could block).
TEST(OocEpoch, RecoveryAndInspectionRefuseSpecialFiles) {
  files f;
  const std::string fifo = f.disk("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::pair<std::string, const char*> cases[] = {{fifo, "is a FIFO (named pipe)"},
                                                       {f.dirs.snapshot_dir(), "is a directory"},
                                                       {"/dev/null", "is a character device"}};
  for (const auto& [path, words] : cases) {
    expect_error(gpm::errc::invalid_argument, words, [&] { gpm::ooc::recover_epoch_log(path); });
    expect_error(gpm::errc::invalid_argument, words, [&] { gpm::ooc::inspect_epoch_log(path); });
  }
  expect_error(gpm::errc::invalid_argument, "is a FIFO (named pipe)",
               [&] { gpm::ooc::recover_epoch_log(fifo, 4096); });
}

TEST(OocEpoch, ALogOfAnotherFileOrRangeIsRefused) {
  files f;
  const std::string a = logged(f, "a.bin");
  const std::string b = f.make("b.bin", lines(8), 2);
  fs::copy_file(gpm::ooc::epoch_log_path(a), gpm::ooc::epoch_log_path(b));
  expect_refused(b, gpm::errc::layout_mismatch, "a file named \"a.bin\"");
  const std::string c = f.make("c.bin", lines(8), 2);
  { mapping m(c, lines(4), lines(2), consistent(mode::read_write)); }
  fs::rename(gpm::ooc::epoch_log_path(c, lines(2)), gpm::ooc::epoch_log_path(c));
  expect_refused(c, gpm::errc::layout_mismatch,
                 "belongs to bytes from " + std::to_string(lines(2)));
}

TEST(OocEpoch, ACommittedRecordThatFailsItsChecksumChangesNothing) {
  committed_file c;
  const std::string log = gpm::ooc::epoch_log_path(c.path);
  auto b = read_file(log);
  // The first record's payload: its bytes, or (a staged line) where the staging file holds them.
  b[4096 + 48] ^= 0x01;
  write_file(log, b);
  expect_error(gpm::errc::corrupt, "payload",
               [&] { mapping m(c.path, lines(kChildLines), 0, consistent(mode::read_write)); });
  expect_error(gpm::errc::corrupt, "fails its checksum",
               [&] { gpm::ooc::recover_epoch_log(c.path); });
  EXPECT_EQ(read_file(c.path), c.before);
  EXPECT_EQ(read_file(log), b);
  b[4096 + 48] ^= 0x01;
  write_file(log, b);
  EXPECT_TRUE(gpm::ooc::recover_epoch_log(c.path).replayed);
  EXPECT_EQ(read_file(c.path), c.after);
}

// A committed epoch's staged lines lie in the staging file beside the log, which recovery reads and
// checks with the records: other bytes there, or no staging file, and nothing is written; with it
// restored, recovery applies the epoch and removes the staging file the crashed mapping left.
TEST(OocEpoch, RecoveryReadsAndChecksTheStagedLinesTheRecordsName) {
  committed_file c;
  const std::string staging = gpm::ooc::epoch_log_path(c.path) + ".staged";
  const auto good = read_file(staging);
  ASSERT_FALSE(good.empty()) << "the child staged lines (16 lines through 6 host lines)";
  auto other = good;
  for (auto& byte : other) byte ^= 0xff;
  write_file(staging, other);
  expect_error(gpm::errc::corrupt, "fails its checksum",
               [&] { mapping m(c.path, lines(kChildLines), 0, consistent(mode::read_write)); });
  expect_error(gpm::errc::corrupt, "staging file", [&] { gpm::ooc::recover_epoch_log(c.path); });
  EXPECT_EQ(read_file(c.path), c.before);
  write_file(staging, std::vector<unsigned char>(good.begin(), good.begin() + 4096));
  expect_error(gpm::errc::corrupt, "cut short", [&] { gpm::ooc::recover_epoch_log(c.path); });
  fs::remove(staging);
  expect_error(gpm::errc::corrupt, "missing", [&] { gpm::ooc::recover_epoch_log(c.path); });
  fs::create_symlink(c.path, staging);
  expect_error(gpm::errc::corrupt, "missing (or not a file)",
               [&] { gpm::ooc::recover_epoch_log(c.path); });
  EXPECT_EQ(read_file(c.path), c.before);
  fs::remove(staging);
  write_file(staging, good);
  EXPECT_TRUE(gpm::ooc::recover_epoch_log(c.path).replayed);
  EXPECT_EQ(read_file(c.path), c.after);
  EXPECT_FALSE(fs::exists(staging));
}

// A log an older gpmkit created (without the staged-records feature bit) is still used: its
// epochs take staged lines as copies, so an older gpmkit can still read it.
TEST(OocEpoch, ALogWithoutStagedRecordsTakesCopies) {
  files f;
  const std::string path = f.make("old.bin", lines(64), 2);
  const std::string log = gpm::ooc::epoch_log_path(path);
  mapping(path, lines(64), 0, consistent(mode::read_write)).unmap();  // creates the log
  auto page = read_file(log);
  gpm::format::object_header h;
  std::memcpy(&h, page.data(), sizeof h);
  ASSERT_EQ(h.incompat_features, 2u) << "staged records: bit 2 in every new log";
  h.incompat_features = 0;
  std::memcpy(page.data(), &h, sizeof h);
  gpm::format::seal_header(page.data());
  write_file(log, page);
  const auto values = numbers(lines(64) / 4, 17);
  mapping m(path, lines(64), 0, consistent(mode::read_write));
  store_all(m.ref<std::uint32_t>(), values);
  EXPECT_GT(m.stats().spill_bytes_written, lines(32));
  m.sync();
  EXPECT_EQ(read_file(path), bytes_of(values));
  EXPECT_GE(m.stats().log_bytes_written, lines(64));  // every changed byte through the log
}

// A mapping keeps its staging file beside the log while mapped, empties one a crash left (once
// recovery no longer needs it), refuses a link or a directory in its place, and removes it at
// unmap.
TEST(OocEpoch, TheStagingFileLivesWhileTheMappingDoes) {
  files f;
  const std::string path = f.make("s.bin", lines(16), 1);
  const std::string staging = gpm::ooc::epoch_log_path(path) + ".staged";
  write_file(staging, std::vector<unsigned char>(100, 7));  // left by a crash, epoch applied
  {
    mapping m(path, lines(16), 0, consistent(mode::read_write));
    EXPECT_TRUE(fs::is_regular_file(staging));
    EXPECT_EQ(m.stats().spill_bytes_held, 0u);
    store_all(m.ref<std::uint32_t>(), numbers(lines(16) / 4, 5));
    EXPECT_GT(m.stats().spill_bytes_written, 0u);
    m.unmap();
    EXPECT_FALSE(fs::exists(staging));
  }
  EXPECT_EQ(read_file(path), bytes_of(numbers(lines(16) / 4, 5)));
  fs::create_symlink(path, staging);
  expect_error(gpm::errc::invalid_argument, "a link or not a regular file",
               [&] { mapping m(path, lines(16), 0, consistent(mode::read_write)); });
  fs::remove(staging);
  fs::create_directory(staging);
  expect_error(gpm::errc::invalid_argument, "a link or not a regular file",
               [&] { mapping m(path, lines(16), 0, consistent(mode::read_write)); });
  fs::remove(staging);
  EXPECT_EQ(read_file(path), bytes_of(numbers(lines(16) / 4, 5)));
}

// Random damage to a log holding a committed epoch (bit flips and random bytes, half the time in
// the header page): recovery either refuses it with gpm::error and leaves the data file as it was,
// or works and leaves the file at the previous epoch or the committed one, never anything else.
// inspect_epoch_log likewise works or throws gpm::error. Trials: GPMKIT_FUZZ_ITERATIONS / 4.
int fuzz_trials() {
  const char* env = std::getenv("GPMKIT_FUZZ_ITERATIONS");
  return env != nullptr && std::atoi(env) > 0 ? std::max(1, std::atoi(env) / 4) : 60;
}

// `good` with 1 to 8 of its bytes in [from, from + span) flipped by a bit or replaced; `what`
// gets their offsets.
std::vector<unsigned char> damage(const std::vector<unsigned char>& good, std::uint64_t from,
                                  std::uint64_t span, std::mt19937_64& rng, std::string& what) {
  std::vector<unsigned char> damaged = good;
  what += ", bytes";
  for (int d = 1 + static_cast<int>(rng() % 8); d > 0; --d) {
    const std::uint64_t at = from + rng() % span;
    damaged[at] = rng() % 4 == 0 ? static_cast<unsigned char>(rng())
                                 : static_cast<unsigned char>(damaged[at] ^ (1u << (rng() % 8)));
    what += " " + std::to_string(at);
  }
  return damaged;
}

TEST(OocEpoch, RandomDamageToACommittedLogIsRefusedOrRecovered) {
  committed_file c;
  const std::string log = gpm::ooc::epoch_log_path(c.path);
  const std::vector<unsigned char> good = read_file(log);
  const int trials = fuzz_trials();
  std::mt19937_64 rng(0xe90c);
  int refused = 0, previous = 0, committed = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::uint64_t span =
        rng() % 2 == 0 ? std::min<std::uint64_t>(4096, good.size()) : good.size();
    std::string what = "trial " + std::to_string(trial);
    const std::vector<unsigned char> damaged = damage(good, 0, span, rng, what);
    write_file(c.path, c.before);
    write_file(log, damaged);
    try {
      (void)gpm::ooc::inspect_epoch_log(c.path);
    } catch (const gpm::error&) {
    }
    try {
      gpm::ooc::recover_epoch_log(c.path);
    } catch (const gpm::error&) {
      ++refused;
      EXPECT_EQ(read_file(c.path), c.before) << what << ": a refused log changed the file";
      continue;
    }
    const std::vector<unsigned char> now = read_file(c.path);
    if (now == c.before) {
      ++previous;
    } else {
      ++committed;
      EXPECT_EQ(now, c.after) << what << ": the file is neither epoch 0 nor epoch 1";
    }
  }
  std::printf("[ fuzz     ] %d trials: %d refused, %d recovered to epoch 0, %d to epoch 1\n",
              trials, refused, previous, committed);
}

// The same for a range striped over three files whose log holds a committed epoch: recovery
// refuses the damaged log and leaves every file as it was, or leaves all three at the previous
// epoch or all three at the committed one. Damage lands in the header page, the stripe table or
// the records.
TEST(OocEpoch, RandomDamageToAStripedLogIsRefusedOrRecoveredInEveryFile) {
  files f;
  const std::string path = f.disk("s.bin");
  const std::vector<std::string> paths = stripes_of(path);
  std::vector<std::vector<unsigned char>> before(3, std::vector<unsigned char>(lines(6)));
  scatter(before, 0, pattern(lines(kChildLines), 5));
  for (int k = 0; k < 3; ++k) write_file(paths[k], before[k]);
  kill_child_at(f, path, "ooc.log.committed", "ooc_striped_commit_then_die");
  auto after = before;
  scatter(after, 0, bytes_of(numbers(lines(kChildLines) / 4, 7)));
  const std::string log = gpm::ooc::epoch_log_path(path);
  const std::vector<unsigned char> good = read_file(log);
  ASSERT_TRUE(gpm::ooc::inspect_epoch_log(path).pending);
  const auto contents = [&] {
    std::vector<std::vector<unsigned char>> now;
    for (const auto& p : paths) now.push_back(read_file(p));
    return now;
  };
  const int trials = fuzz_trials();
  std::mt19937_64 rng(0x57e1);
  int refused = 0, previous = 0, committed = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::uint64_t region = rng() % 3;  // header page, stripe table page, anywhere
    const std::uint64_t from = region == 1 ? 4096 : 0;
    const std::uint64_t span = region == 2 ? good.size() : 4096;
    std::string what = "trial " + std::to_string(trial);
    const std::vector<unsigned char> damaged = damage(good, from, span, rng, what);
    for (int k = 0; k < 3; ++k) write_file(paths[k], before[k]);
    write_file(log, damaged);
    try {
      (void)gpm::ooc::inspect_epoch_log(path);
    } catch (const gpm::error&) {
    }
    try {
      gpm::ooc::recover_epoch_log(path);
    } catch (const gpm::error&) {
      ++refused;
      EXPECT_EQ(contents(), before) << what << ": a refused log changed a file";
      continue;
    }
    const auto now = contents();
    if (now == before) {
      ++previous;
    } else {
      ++committed;
      EXPECT_EQ(now, after) << what << ": the files are neither all at epoch 0 nor all at epoch 1";
    }
  }
  std::printf(
      "[ fuzz     ] striped: %d trials: %d refused, %d recovered to epoch 0, %d to epoch 1\n",
      trials, refused, previous, committed);
  EXPECT_GT(refused, 0);
}

TEST(OocEpoch, DiskFullWhileLoggingKeepsTheFileAndTheData) {
  files f;
  const std::string path = f.make("full.bin", lines(32), 3);
  const auto before = read_file(path);
  const auto values = numbers(lines(32) / 4, 13);
  // A host cache that holds every line: nothing is staged, so the log is the first file to grow.
  mapping m(path, lines(32), 0, consistent(mode::read_write, 8, 40));
  store_all(m.ref<std::uint32_t>(), values);
  {
    file_size_limit limit(4096 + lines(3));  // the log holds a few records, then EFBIG
    expect_error(gpm::errc::io, "the epoch is not committed, the file is unchanged",
                 [&] { m.sync(); });
  }
  EXPECT_EQ(read_file(path), before);
  EXPECT_EQ(m.stats().epoch, 0u);
  EXPECT_FALSE(gpm::ooc::inspect_epoch_log(path).pending);
  m.sync();  // room again: the dropped records are written anew
  EXPECT_EQ(read_file(path), bytes_of(values));
  EXPECT_EQ(m.stats().epoch, 1u);
}

// The same with staged lines of a write mapping: nothing is committed, lines staged again
// afterwards merge into their staged copies, and the next epoch carries every byte written before
// the failure and after it.
TEST(OocEpoch, DiskFullWhileLoggingStagedLinesKeepsEveryByteWritten) {
  files f;
  const std::string path = f.make("fullw.bin", lines(64), 4);
  const auto before = read_file(path);
  mapping m(path, lines(64), 0, consistent(mode::write));
  auto a = m.ref<std::uint32_t>();
  auto expect = as<std::uint32_t>(before);
  const std::uint64_t per_line = line_size() / 4;
  // Two elements in each of lines [first, first + n), from element k of the line on.
  const auto write_lines = [&](std::uint64_t first, std::uint64_t n, std::uint64_t k,
                               std::uint32_t salt) {
    std::vector<std::uint64_t> idx;
    std::vector<std::uint32_t> vals;
    for (std::uint64_t l = first; l < first + n; ++l) {
      idx.insert(idx.end(), {l * per_line + k, l * per_line + k + per_line / 2});
      vals.insert(vals.end(),
                  {static_cast<std::uint32_t>(l) ^ salt, static_cast<std::uint32_t>(salt + k)});
    }
    expect_all(store(a, idx, vals), status::ok);
    for (std::size_t j = 0; j < idx.size(); ++j) expect[idx[j]] = vals[j];
  };
  // Lines 0-15, then 48 others through the 8-line GPU and 6-line host caches: 0-15 are staged.
  write_lines(0, 16, 3, 0xa5a50000u);
  write_lines(16, 48, 3, 0xa5a50000u);
  EXPECT_GE(m.stats().spill_bytes_written, 16 * 8u);  // 8 bytes written a line
  {
    file_size_limit limit(4096 + 100);  // the sync's first write is the log's: EFBIG
    expect_error(gpm::errc::io, "the epoch is not committed, the file is unchanged",
                 [&] { m.sync(0, lines(16)); });
  }
  EXPECT_EQ(read_file(path), before);
  write_lines(0, 64, 7, 0x5a5a0000u);  // lines 0-15 are staged again
  m.sync();
  EXPECT_EQ(as<std::uint32_t>(read_file(path)), expect);
  EXPECT_EQ(m.stats().epoch, 1u);
}

}  // namespace
