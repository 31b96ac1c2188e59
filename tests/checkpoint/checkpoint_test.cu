// Tests of gpm::checkpointer on both backends: round trips over both copy paths, the GPU digest
// against the host's, chunks found by name in any order after a reopen, redundant-chunk
// elimination and its predictor, pre-copy, asynchronous checkpoints isolated from later kernels,
// corrupt copies repaired or named, disk snapshots, every error the API promises, and the libGPM
// compat API.
#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/checkpoint/digest.hpp>
#include <gpm/checkpoint/format.hpp>
#include <gpm/compat/gpmcp.hpp>
#include <gpm/platform/kernel.cuh>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "kernels.hpp"  // src/checkpoint: the digest kernel itself

namespace {

constexpr char kLayout[] = "checkpoint-test";

__global__ void fill(std::uint64_t* data, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i : gpm::grid_stride(n)) data[i] = gpm::mix64(seed * 0x100000001b3ull + i);
}

std::vector<std::uint64_t> expected(std::uint64_t n, std::uint64_t seed) {
  std::vector<std::uint64_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = gpm::mix64(seed * 0x100000001b3ull + i);
  return v;
}

void fill_device(gpm::device_buffer<std::uint64_t>& b, std::uint64_t seed,
                 cudaStream_t s = nullptr) {
  gpm::launch(fill, 4, 128, 0, s, b.data(), b.size(), seed);
}

struct fixture : ::testing::Test {
  gpm::test::scratch_dirs dirs{"cp"};
  gpm::pool_options pool_options() const {
    gpm::pool_options o;
    o.pm_dir = dirs.pm_dir();
    o.snapshot_dir = dirs.snapshot_dir();
    o.notice = [](const std::string&) {};
    return o;
  }
  gpm::pool make_pool(std::uint64_t bytes = 8 << 20) {
    return gpm::pool::create("cp.pool", bytes, kLayout, pool_options());
  }
  gpm::pool reopen() { return gpm::pool::open("cp.pool", kLayout, pool_options()); }
  static gpm::checkpoint_options quiet(gpm::copy_path path = gpm::copy_path::automatic) {
    gpm::checkpoint_options o;
    o.path = path;
    o.notice = [](const std::string&) {};
    return o;
  }
};

template <class F>
gpm::errc error_of(F&& f) {
  try {
    f();
  } catch (const gpm::error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no gpm::error was thrown";
  return gpm::errc::io;
}

// ---- digest ---------------------------------------------------------------------------------

TEST(ChunkDigest, GpuEqualsHostForEverySizeAndAlignment) {
  const std::vector<std::uint64_t> host =
      gpm::test::random_values<std::uint64_t>(4096, 11, 0, ~0ull);
  gpm::device_buffer<std::uint64_t> d = gpm::test::to_device(host);
  gpm::device_buffer<unsigned long long> sum(1);
  for (std::uint64_t words_offset : {0u, 1u}) {  // 16-byte aligned and only 8-byte aligned
    for (std::uint64_t bytes : {1ull, 7ull, 8ull, 9ull, 24ull, 4000ull, 8 * 3001ull}) {
      sum.fill_bytes(0);
      gpm::checkpoint_detail::enqueue_span({d.data() + words_offset, nullptr, bytes, 0}, sum.data(),
                                           2, nullptr);
      const auto s = gpm::test::to_host(sum);
      EXPECT_EQ(gpm::chunk_digest_finish(s[0], bytes),
                gpm::chunk_digest(host.data() + words_offset, bytes))
          << bytes << " bytes at word " << words_offset;
    }
  }
}

// A batch: chunks of many sizes (several tiles, one, less than a word) and both alignments in one
// launch, some copied and some only digested; each chunk's digest and copy are its own, and
// nothing outside a copy's range is written.
TEST(ChunkDigest, ABatchDigestsAndCopiesEachChunkAsAlone) {
  namespace kd = gpm::checkpoint_detail;
  constexpr std::uint64_t kWords = 3 * kd::kTileBytes / 8 + 64;
  const std::vector<std::uint64_t> host =
      gpm::test::random_values<std::uint64_t>(kWords, 12, 0, ~0ull);
  gpm::device_buffer<std::uint64_t> src = gpm::test::to_device(host);
  gpm::device_buffer<std::uint64_t> dst(kWords);
  dst.fill_bytes(0xee);
  struct piece {
    std::uint64_t word, bytes;
    bool copy;
  };
  const std::vector<piece> pieces = {
      {0, 2 * kd::kTileBytes + 24, true},  // three tiles, 16-byte aligned
      {kWords - 2 * (kd::kTileBytes / 8) - 7, 2 * kd::kTileBytes + 13, true},  // 8-byte aligned
      {1, 5, false},
      {2 * (kd::kTileBytes / 8) + 9, kd::kTileBytes, false},
      {2 * (kd::kTileBytes / 8) + 3, 48, true},
      {100, 8, true},
  };
  std::vector<kd::chunk_span> table;
  std::uint64_t tiles = 0;
  for (const piece& c : pieces) {
    table.push_back({src.data() + c.word, c.copy ? dst.data() + c.word : nullptr, c.bytes, tiles});
    tiles += kd::tiles_of(c.bytes);
  }
  // Where two copies overlap they write the same values (a word goes to its own index).
  gpm::device_buffer<kd::chunk_span> d_table = gpm::test::to_device(table);
  gpm::device_buffer<unsigned long long> sums(pieces.size());
  sums.fill_bytes(0);
  kd::enqueue_spans(d_table.data(), static_cast<std::uint32_t>(pieces.size()), tiles, sums.data(),
                    2, nullptr);
  const auto s = gpm::test::to_host(sums);
  const auto out = gpm::test::to_host(dst);
  std::vector<unsigned char> want(kWords * 8, 0xee);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const piece& c = pieces[k];
    EXPECT_EQ(gpm::chunk_digest_finish(s[k], c.bytes), gpm::chunk_digest(&host[c.word], c.bytes))
        << "chunk " << k;
    if (c.copy) std::memcpy(want.data() + c.word * 8, &host[c.word], c.bytes);
  }
  EXPECT_EQ(std::memcmp(out.data(), want.data(), want.size()), 0);
}

TEST(ChunkDigest, OneChangedWordOrSwappedWordsChangeIt) {
  std::vector<std::uint64_t> v = expected(64, 3);
  const std::uint64_t base = gpm::chunk_digest(v.data(), v.size() * 8);
  v[17] ^= 1;
  EXPECT_NE(gpm::chunk_digest(v.data(), v.size() * 8), base);
  v[17] ^= 1;
  std::swap(v[3], v[4]);
  EXPECT_NE(gpm::chunk_digest(v.data(), v.size() * 8), base);
  std::swap(v[3], v[4]);
  EXPECT_NE(gpm::chunk_digest(v.data(), v.size() * 8 - 1), base);  // the length counts
}

// ---- round trips ----------------------------------------------------------------------------

class CheckpointPaths : public fixture, public ::testing::WithParamInterface<gpm::copy_path> {};

// Chunk d is large enough to go by DMA on the DMA path; the others are copied by the digest
// kernel's stores there (copy_engine.hpp, kDmaMinBytes).
TEST_P(CheckpointPaths, RestoresTheLastCheckpointOfEachGroup) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "train", quiet(GetParam()));
  gpm::device_buffer<std::uint64_t> a(1000), b(333), c(4096), d(9001);
  cp.add("a", a.data(), a.size(), 0);
  cp.add("b", b.data(), b.size(), 0);
  cp.add("c", c.data(), c.size(), 1);
  cp.add("d", d.data(), d.size(), 0);
  EXPECT_EQ(cp.last_checkpoint(0), 0u);
  fill_device(a, 1);
  fill_device(b, 2);
  fill_device(c, 3);
  fill_device(d, 8);
  const gpm::checkpoint_result r0 = cp.checkpoint(0);
  EXPECT_EQ(r0.seq, 1u);
  EXPECT_EQ(r0.copied, 3u);
  EXPECT_EQ(r0.bytes_copied, (1000 + 333 + 9001) * 8u);
  EXPECT_NE(r0.path, gpm::copy_path::automatic);
  cp.checkpoint(1);
  fill_device(a, 4);  // checkpoint 3 holds a=4, b=2
  cp.checkpoint(0);
  fill_device(a, 5);
  fill_device(b, 6);
  fill_device(c, 7);
  fill_device(d, 9);
  const gpm::restore_result r = cp.restore(0);
  EXPECT_EQ(r.seq, 3u);
  EXPECT_EQ(r.chunks, 3u);
  EXPECT_TRUE(r.repaired.empty());
  EXPECT_EQ(gpm::test::to_host(a), expected(1000, 4));
  EXPECT_EQ(gpm::test::to_host(b), expected(333, 2));
  EXPECT_EQ(gpm::test::to_host(d), expected(9001, 8));
  EXPECT_EQ(gpm::test::to_host(c), expected(4096, 7));  // group 1 untouched
  cp.restore(1);
  EXPECT_EQ(gpm::test::to_host(c), expected(4096, 3));
  EXPECT_EQ(cp.last_checkpoint(0), 3u);
  EXPECT_EQ(cp.last_checkpoint(1), 2u);
}

INSTANTIATE_TEST_SUITE_P(Paths, CheckpointPaths,
                         ::testing::Values(gpm::copy_path::gpu_stores, gpm::copy_path::dma,
                                           gpm::copy_path::automatic),
                         [](const auto& info) {
                           std::string s(gpm::to_string(info.param));
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

using CheckpointTest = fixture;

TEST_F(CheckpointTest, ChunksAreFoundByNameInAnyOrderAfterReopen) {
  gpm::device_buffer<std::uint64_t> x(100), y(200);
  {
    gpm::pool p = make_pool();
    gpm::checkpointer cp = gpm::checkpointer::create(p, "named", quiet());
    cp.add("x", x.data(), x.size());
    cp.add("y", y.data(), y.size());
    fill_device(x, 10);
    fill_device(y, 20);
    cp.checkpoint();
  }
  fill_device(x, 0);
  fill_device(y, 0);
  gpm::pool p = reopen();
  gpm::checkpointer cp = gpm::checkpointer::open(p, "named", quiet());
  cp.add("y", y.data(), y.size());  // the other order
  cp.add("x", x.data(), x.size());
  EXPECT_EQ(cp.last_checkpoint(), 1u);
  cp.restore();
  EXPECT_EQ(gpm::test::to_host(x), expected(100, 10));
  EXPECT_EQ(gpm::test::to_host(y), expected(200, 20));
  const auto info = cp.chunks();
  ASSERT_EQ(info.size(), 2u);
  EXPECT_EQ(info[0].name, "x");
  EXPECT_EQ(info[0].type_tag, gpm::checkpoint_type_tag<std::uint64_t>());
  EXPECT_TRUE(info[0].attached);
}

TEST_F(CheckpointTest, MismatchedRegistrationIsAnErrorNamingBoth) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "m", quiet());
  gpm::device_buffer<std::uint64_t> x(100);
  gpm::device_buffer<float> f(200);
  cp.add("x", x.data(), x.size());
  try {
    cp.add("x", x.data(), 99);
    FAIL() << "a size mismatch was accepted";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("800 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("792 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_of([&] { cp.add("x", f.data(), 200); }), gpm::errc::invalid_argument);  // type
  EXPECT_EQ(error_of([&] { cp.add("x", x.data(), x.size(), 1); }), gpm::errc::invalid_argument);
}

TEST_F(CheckpointTest, ErrorsSayWhatIsWrong) {
  gpm::pool p = make_pool(2 << 20);
  gpm::checkpoint_options small = quiet();
  small.max_chunks = 2;
  gpm::checkpointer cp = gpm::checkpointer::create(p, "e", small);
  gpm::device_buffer<std::uint64_t> x(64), y(64), z(64);
  EXPECT_EQ(error_of([&] { cp.restore(); }), gpm::errc::not_found);     // no chunks
  EXPECT_EQ(error_of([&] { cp.checkpoint(); }), gpm::errc::not_found);  // no chunks
  cp.add("x", x.data(), x.size());
  EXPECT_EQ(error_of([&] { cp.restore(); }), gpm::errc::not_found);  // never checkpointed
  EXPECT_EQ(error_of([&] { cp.precopy("nope"); }), gpm::errc::not_found);
  EXPECT_EQ(error_of([&] { cp.add("", x.data(), 8); }), gpm::errc::invalid_argument);
  EXPECT_EQ(error_of([&] { cp.add("odd", reinterpret_cast<char*>(x.data()) + 4, 8); }),
            gpm::errc::invalid_argument);
  EXPECT_EQ(error_of([&] { cp.add("big", x.data(), 4ull << 20); }), gpm::errc::out_of_memory);
  cp.add("y", y.data(), y.size());
  EXPECT_EQ(error_of([&] { cp.add("z", z.data(), z.size()); }), gpm::errc::out_of_memory);
  EXPECT_EQ(error_of([&] { gpm::checkpointer::create(p, "e", quiet()); }),
            gpm::errc::already_exists);
  // A second handle of an open checkpoint would flip its records under the first: refused.
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "e", quiet()); }), gpm::errc::busy);
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "absent", quiet()); }), gpm::errc::not_found);
  EXPECT_EQ(error_of([&] { gpm::checkpointer::create(p, std::string(40, 'n'), quiet()); }),
            gpm::errc::invalid_argument);
}

TEST_F(CheckpointTest, AChunkWithoutABufferInThisProcessIsNamed) {
  gpm::device_buffer<std::uint64_t> x(64), y(64);
  {
    gpm::pool p = make_pool();
    gpm::checkpointer cp = gpm::checkpointer::create(p, "att", quiet());
    cp.add("x", x.data(), x.size());
    cp.add("y", y.data(), y.size());
    cp.checkpoint();
  }
  gpm::pool p = reopen();
  gpm::checkpointer cp = gpm::checkpointer::open(p, "att", quiet());
  cp.add("x", x.data(), x.size());
  try {
    cp.restore();
    FAIL();
  } catch (const gpm::error& e) {
    EXPECT_NE(std::string(e.what()).find("\"y\""), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, DamagedHeadersAndVersionsAreRefused) {
  gpm::pool p = make_pool();
  gpm::checkpointer::create(p, "h", quiet()).close();
  auto* h = p.host_ptr<gpm::format::checkpoint::header>(p.get("cp.h").offset);
  h->max_chunks ^= 1;
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "h", quiet()); }), gpm::errc::corrupt);
  h->max_chunks ^= 1;
  h->common.major = 9;
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "h", quiet()); }), gpm::errc::version);
  h->common.major = 1;  // a checkpoint of format 1.0, before the common object header
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "h", quiet()); }), gpm::errc::version);
  h->common.major = gpm::format::checkpoint::kKind.major;
  std::memset(h->common.magic, 0, sizeof h->common.magic);
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "h", quiet()); }), gpm::errc::corrupt);
}

TEST_F(CheckpointTest, BothCommitRecordsTornIsCorrupt) {
  gpm::pool p = make_pool();
  gpm::device_buffer<std::uint64_t> x(64);
  {
    gpm::checkpointer cp = gpm::checkpointer::create(p, "r", quiet());
    cp.add("x", x.data(), x.size());
    cp.checkpoint();
    cp.checkpoint();
  }
  char* obj = p.host_ptr<char>(p.get("cp.r").offset);
  const auto* h = reinterpret_cast<gpm::format::checkpoint::header*>(obj);
  obj[h->records_offset + 8] ^= 1;                     // record 0's seq
  gpm::checkpointer::open(p, "r", quiet()).close();    // record 1 still holds
  obj[h->records_offset + h->record_bytes + 40] ^= 1;  // and now record 1's first entry
  EXPECT_EQ(error_of([&] { gpm::checkpointer::open(p, "r", quiet()); }), gpm::errc::corrupt);
}

TEST_F(CheckpointTest, ACorruptCopyIsRepairedFromTheOlderOneOrNamed) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "c", quiet(gpm::copy_path::dma));
  gpm::device_buffer<std::uint64_t> w(512);
  cp.add("weights", w.data(), w.size());
  fill_device(w, 1);
  cp.checkpoint();  // copy a holds seed 1
  fill_device(w, 2);
  cp.checkpoint();  // copy b holds seed 2, in force
  const auto obj = p.get("cp.c.0.b");
  p.host_ptr<std::uint64_t>(obj.offset)[100] ^= 0x10;
  const gpm::restore_result r = cp.restore();
  ASSERT_EQ(r.repaired.size(), 1u);
  EXPECT_NE(r.repaired[0].find("weights"), std::string::npos);
  EXPECT_EQ(gpm::test::to_host(w), expected(512, 1));  // the older checkpoint's data
  p.host_ptr<std::uint64_t>(p.get("cp.c.0.a").offset)[3] ^= 1;
  try {
    cp.restore();
    FAIL() << "two corrupt copies were restored";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::corrupt);
    EXPECT_NE(std::string(e.what()).find("\"weights\""), std::string::npos) << e.what();
  }
}

// ---- HeteroCheckpoint optimisations ---------------------------------------------------------

TEST_F(CheckpointTest, UnchangedChunksAreSkippedOncePredictedAndChangesAreCaught) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "red", quiet(gpm::copy_path::gpu_stores));
  gpm::device_buffer<std::uint64_t> ro(2048), rw(256);
  cp.add("input", ro.data(), ro.size());
  cp.add("state", rw.data(), rw.size());
  fill_device(ro, 1);
  std::vector<gpm::checkpoint_result> rs;
  for (int it = 0; it < 6; ++it) {
    fill_device(rw, 100 + it);
    rs.push_back(cp.checkpoint());
  }
  // The predictor starts at "not redundant": two unchanged checkpoints take "input" to "likely
  // redundant", from where it is checksummed first and skipped.
  EXPECT_EQ(rs[0].copied, 2u);
  EXPECT_EQ(rs[1].copied, 2u);
  EXPECT_EQ(rs[2].copied, 2u);
  for (int it = 3; it < 6; ++it) {
    EXPECT_EQ(rs[it].redundant, 1u) << it;
    EXPECT_EQ(rs[it].copied, 1u) << it;
    EXPECT_EQ(rs[it].bytes_copied, 256 * 8u) << it;
  }
  fill_device(ro, 2);  // the read-only chunk changes after all
  const gpm::checkpoint_result changed = cp.checkpoint();
  EXPECT_EQ(changed.mispredicted, 1u);
  EXPECT_EQ(changed.copied, 2u);
  fill_device(ro, 3);
  fill_device(rw, 3);
  cp.restore();
  EXPECT_EQ(gpm::test::to_host(ro), expected(2048, 2));
  EXPECT_EQ(gpm::test::to_host(rw), expected(256, 105));
  EXPECT_EQ(cp.last_checkpoint(), 7u);
}

TEST_F(CheckpointTest, EliminationOffCopiesEverything) {
  gpm::pool p = make_pool();
  gpm::checkpoint_options o = quiet();
  o.eliminate_redundant = false;
  gpm::checkpointer cp = gpm::checkpointer::create(p, "nored", o);
  gpm::device_buffer<std::uint64_t> ro(128);
  cp.add("input", ro.data(), ro.size());
  fill_device(ro, 1);
  for (int it = 0; it < 5; ++it) EXPECT_EQ(cp.checkpoint().copied, 1u);
}

TEST_F(CheckpointTest, PrecopiedChunksAreNotCopiedAgain) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "pre", quiet(gpm::copy_path::dma));
  gpm::device_buffer<std::uint64_t> early(1024), late(64);
  cp.add("early", early.data(), early.size());
  cp.add("late", late.data(), late.size());
  gpm::stream s;
  fill_device(early, 7, s);
  cp.precopy("early", s);  // "early" is final from here; its copy overlaps the next kernel
  fill_device(late, 8, s);
  const gpm::checkpoint_result r = cp.checkpoint(0, s);
  EXPECT_EQ(r.precopied, 1u);
  EXPECT_EQ(r.copied, 2u);
  fill_device(early, 0, s);
  fill_device(late, 0, s);
  cp.restore(0, s);
  EXPECT_EQ(gpm::test::to_host(early), expected(1024, 7));
  EXPECT_EQ(gpm::test::to_host(late), expected(64, 8));
  // Hints can be switched off, to measure what they bring.
  gpm::checkpoint_options off = quiet();
  off.honour_precopy = false;
  gpm::checkpointer cp2 = gpm::checkpointer::create(p, "nopre", off);
  cp2.add("early", early.data(), early.size());
  cp2.precopy("early");
  EXPECT_EQ(cp2.checkpoint().precopied, 0u);
}

// The automatic path measures on a chunk's working copy: never on one a pre-copy has filled.
TEST_F(CheckpointTest, MeasuringTheCopyPathSparesPrecopiedChunks) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "premeasure", quiet());
  gpm::device_buffer<std::uint64_t> big(8192), small(64);
  cp.add("big", big.data(), big.size());
  cp.add("small", small.data(), small.size());
  fill_device(big, 3);
  cp.precopy("big");
  fill_device(small, 4);
  cp.checkpoint();
  fill_device(big, 0);
  cp.restore();
  EXPECT_EQ(gpm::test::to_host(big), expected(8192, 3));
  EXPECT_NE(cp.chosen_path(), gpm::copy_path::automatic);  // measured on "small"
}

TEST_F(CheckpointTest, AsyncCheckpointCapturesStateBeforeLaterKernels) {
  gpm::pool p = make_pool();
  gpm::checkpointer cp = gpm::checkpointer::create(p, "async", quiet());
  gpm::device_buffer<std::uint64_t> w(4096);
  cp.add("w", w.data(), w.size());
  gpm::stream s;
  fill_device(w, 1, s);
  gpm::pending_checkpoint pending = cp.checkpoint_async(0, s);
  fill_device(w, 2, s);  // runs after the capture, while the persist may still run
  const gpm::checkpoint_result r = pending.get();
  EXPECT_EQ(r.seq, 1u);
  EXPECT_EQ(r.copied, 1u);
  s.synchronize();
  EXPECT_EQ(gpm::test::to_host(w), expected(4096, 2));
  cp.restore(0, s);
  EXPECT_EQ(gpm::test::to_host(w), expected(4096, 1));
  // A second asynchronous checkpoint waits for nothing left pending; close() waits for it.
  fill_device(w, 3, s);
  cp.checkpoint_async(0, s);
  cp.close();
  gpm::checkpointer again = gpm::checkpointer::open(p, "async", quiet());
  again.add("w", w.data(), w.size());
  EXPECT_EQ(again.last_checkpoint(), 2u);
  again.restore();
  EXPECT_EQ(gpm::test::to_host(w), expected(4096, 3));
}

TEST_F(CheckpointTest, SnapshotsMakeCheckpointsSurviveLosingThePoolFile) {
  gpm::device_buffer<std::uint64_t> w(300);
  {
    gpm::pool p = make_pool();
    gpm::checkpoint_options o = quiet();
    o.snapshot_every = 1;
    gpm::checkpointer cp = gpm::checkpointer::create(p, "snap", o);
    cp.add("w", w.data(), w.size());
    fill_device(w, 42);
    EXPECT_TRUE(cp.checkpoint().snapshotted);
  }
  std::filesystem::remove(dirs.pool_path("cp.pool"));  // what a reboot does to tmpfs
  gpm::pool p = reopen();
  gpm::checkpointer cp = gpm::checkpointer::open(p, "snap", quiet());
  cp.add("w", w.data(), w.size());
  fill_device(w, 0);
  cp.restore();
  EXPECT_EQ(gpm::test::to_host(w), expected(300, 42));
}

// ---- libGPM compat --------------------------------------------------------------------------

TEST_F(CheckpointTest, GpmcpApiRoundTripsInRegistrationOrder) {
  const std::string path = dirs.pool_path("gpmcp.pool");
  gpm::device_buffer<std::uint64_t> a(128), b(64);
  gpmcp* cp = gpmcp_create(path.c_str(), (128 + 64) * 8, 2, 1);
  ASSERT_NE(cp, nullptr);
  ASSERT_EQ(gpmcp_register(cp, a.data(), a.bytes(), 0), 0);
  ASSERT_EQ(gpmcp_register(cp, b.data(), b.bytes(), 0), 0);
  EXPECT_EQ(gpmcp_restore(cp, 0), -1);  // nothing checkpointed yet
  fill_device(a, 5);
  fill_device(b, 6);
  ASSERT_EQ(gpmcp_checkpoint(cp, 0), 0);
  gpmcp_close(cp);
  fill_device(a, 0);
  fill_device(b, 0);
  cp = gpmcp_open(path.c_str());
  ASSERT_NE(cp, nullptr);
  ASSERT_EQ(gpmcp_register(cp, a.data(), a.bytes(), 0), 0);
  ASSERT_EQ(gpmcp_register(cp, b.data(), 100, 0), -1);  // not what was registered second
  ASSERT_EQ(gpmcp_register(cp, b.data(), b.bytes(), 0), 0);
  ASSERT_EQ(gpmcp_restore(cp, 0), 0);
  EXPECT_EQ(gpm::test::to_host(a), expected(128, 5));
  EXPECT_EQ(gpm::test::to_host(b), expected(64, 6));
  gpmcp_close(cp);
  EXPECT_EQ(gpmcp_open((path + ".absent").c_str()), nullptr);
}

// No C++ exception may cross the C functions, sizes that overflow are refused, and a failed
// create leaves no file behind.
TEST_F(CheckpointTest, GpmcpApiFailsCleanlyAndLeavesNothing) {
  const std::string path = dirs.pool_path("gpmcp-bad.pool");
  EXPECT_EQ(gpmcp_create(nullptr, 4096, 1, 1), nullptr);
  EXPECT_EQ(gpmcp_open(nullptr), nullptr);
  EXPECT_EQ(gpmcp_create(path.c_str(), 4096, (std::size_t{1} << 63) + 1, 2), nullptr);
  EXPECT_EQ(gpmcp_create(path.c_str(), ~std::size_t{0}, 1, 1), nullptr);
  EXPECT_EQ(gpmcp_create(path.c_str(), ~std::size_t{0} / 2, 1, 1), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a failed create left a pool file";
  EXPECT_EQ(gpmcp_register(nullptr, nullptr, 8, 0), -1);
  EXPECT_EQ(gpmcp_checkpoint(nullptr, 0), -1);
  gpmcp* cp = gpmcp_create(path.c_str(), 4096, 1, 1);
  ASSERT_NE(cp, nullptr);
  gpmcp_close(cp);
}

}  // namespace
