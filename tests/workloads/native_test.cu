// Tests of the native-persistence workloads' pieces: the DIMACS .gr parser and its errors, the
// road-grid generator, the results of run_bfs / run_srad / run_prefix_sum in every pool-based way
// against sequential references, and the validation a resumed run performs on its pool.
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/hash.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "workloads/native/graph.hpp"
#include "workloads/native/native.hpp"

namespace {

using namespace gpmbench::native;

constexpr gpmbench::geometry kGeo{4, 64};

gpm::pool_options options_for(const gpm::test::scratch_dirs& d) {
  gpm::pool_options o;
  o.pm_dir = d.pm_dir();
  o.snapshot_dir = d.snapshot_dir();
  o.notice = [](const std::string&) {};
  return o;
}

std::string write_file(const gpm::test::scratch_dirs& d, const std::string& name,
                       const std::string& text) {
  const std::string path = d.pm_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The error code and message of `f`, which must throw gpm::error.
template <class F>
gpm::error error_of(F&& f) {
  try {
    f();
  } catch (const gpm::error& e) {
    return e;
  }
  ADD_FAILURE() << "no gpm::error was thrown";
  return gpm::error(gpm::errc::invalid_argument, "none");
}

// ---- graphs ---------------------------------------------------------------------------------

TEST(NativeGraph, ReadsDimacsFiles) {
  gpm::test::scratch_dirs d("native-gr");
  const std::string path = write_file(d, "g.gr",
                                      "c a small road network\n"
                                      "p sp 4 5\n"
                                      "a 1 2 7\n"
                                      "a 2 1 7\r\n"
                                      "c comments may appear anywhere\n"
                                      "a 2 3 1\n"
                                      "a 3 4 2\n"
                                      "a 1 4 9\n");
  const csr_graph g = read_dimacs(path);
  EXPECT_EQ(g.nodes, 4u);
  EXPECT_EQ(g.edges(), 5u);
  EXPECT_EQ(g.row, (std::vector<std::uint64_t>{0, 2, 4, 5, 5}));
  EXPECT_EQ(g.col, (std::vector<std::uint32_t>{1, 3, 0, 2, 3}));
}

TEST(NativeGraph, MalformedDimacsFilesAreClearErrors) {
  gpm::test::scratch_dirs d("native-gr-bad");
  struct bad_file {
    const char* text;
    const char* says;
  };
  const bad_file cases[] = {
      {"a 1 2 3\n", "an arc before the 'p sp' line"},
      {"c nothing\n", "no 'p sp"},
      {"p sp 2 1\na 1 3 1\n", "node number out of range"},
      {"p sp 2 1\na 0 1 1\n", "node number out of range"},
      {"p sp 2 2\na 1 2 1\n", "declares 2 arcs, the file has 1"},
      {"p sp 2 1\na 1 2 1\na 2 1 1\n", "more arcs than"},
      {"p sp 2 1\na 1 x 1\n", "expected the arc's head node"},
      {"p sp 2 1\na 1 2\n", "expected the arc's weight"},
      {"p sp 2 1\np sp 2 1\n", "a second 'p' line"},
      {"p sp 0 0\n", "the number of nodes"},
      {"p sp 2 1\nz 1 2 1\n", "unknown line"},
  };
  for (const bad_file& c : cases) {
    const std::string path = write_file(d, "bad.gr", c.text);
    const gpm::error e = error_of([&] { read_dimacs(path); });
    EXPECT_EQ(e.code(), gpm::errc::corrupt) << c.text;
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.gr, line "), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_of([&] { read_dimacs(d.pm_dir() + "/missing.gr"); }).code(), gpm::errc::io);
}

TEST(NativeGraph, RoadGridIsDeterministicAndSymmetric) {
  const csr_graph a = road_grid(30, 20, 50, 7), b = road_grid(30, 20, 50, 7);
  EXPECT_EQ(a.checksum(), b.checksum());
  EXPECT_NE(a.checksum(), road_grid(30, 20, 50, 8).checksum());
  EXPECT_EQ(a.nodes, 600u);
  // Every road is two-way: the arc multiset equals its reverse.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> arcs, reversed;
  for (std::uint64_t v = 0; v < a.nodes; ++v) {
    for (std::uint64_t e = a.row[v]; e < a.row[v + 1]; ++e) {
      arcs.emplace_back(static_cast<std::uint32_t>(v), a.col[e]);
      reversed.emplace_back(a.col[e], static_cast<std::uint32_t>(v));
    }
  }
  std::sort(arcs.begin(), arcs.end());
  std::sort(reversed.begin(), reversed.end());
  EXPECT_EQ(arcs, reversed);
  EXPECT_GE(a.edges(), 2u * (29 * 20 + 30 * 19));
  EXPECT_EQ(error_of([] { road_grid(0, 5, 0, 1); }).code(), gpm::errc::invalid_argument);
  EXPECT_EQ(error_of([] { road_grid(1ull << 17, 1ull << 16, 0, 1); }).code(),
            gpm::errc::invalid_argument);
}

// ---- results --------------------------------------------------------------------------------

const way kPoolWays[] = {way::gpm, way::gpm_ndp, way::cap_mm, way::cpu};

TEST(NativeRun, BfsMatchesASequentialSearchInEveryWay) {
  gpm::test::scratch_dirs d("native-bfs");
  // A .gr file with an unreachable node (5) and a shortcut (1 -> 4).
  bfs_config c;
  c.gr_path = write_file(d, "g.gr",
                         "p sp 5 6\na 1 2 1\na 2 3 1\na 3 4 1\na 1 4 1\na 4 1 1\n"
                         "a 5 1 1\n");
  c.geo = kGeo;
  const std::uint32_t want[] = {0, 1, 2, 1, 0xffffffffu};
  for (const way w : kPoolWays) {
    c.how = w;
    const std::string name = "bfs-" + mode_name(w) + ".pool";
    const run_summary r = run_bfs(name, options_for(d), c, false);
    EXPECT_EQ(r.output_checksum, gpm::checksum64(want, sizeof want)) << mode_name(w);
    EXPECT_EQ(r.steps_total, 4u) << mode_name(w);  // init, levels 0, 1 and the empty level 2
    EXPECT_EQ(r.steps_run, r.steps_total);
  }
}

TEST(NativeRun, EveryWayGivesTheSameResults) {
  gpm::test::scratch_dirs d("native-ways");
  bfs_config b;
  b.width = 33;
  b.height = 17;
  b.geo = kGeo;
  srad_config s;
  s.rows = 40;
  s.cols = 24;
  s.iterations = 3;
  s.geo = kGeo;
  prefix_sum_config p;
  p.arrays = 3;
  p.elements = 1024;
  p.geo = kGeo;
  // The prefix sums' expected checksum, from a sequential scan of the same input.
  std::vector<std::uint32_t> sums(p.arrays * p.elements);
  for (std::uint64_t i = 0; i < sums.size(); ++i) {
    const std::uint32_t x =
        static_cast<std::uint32_t>(gpm::mix64(i ^ (p.seed * 0x9e3779b97f4a7c15ull)) & 0xff);
    sums[i] = (i % p.elements == 0 ? 0 : sums[i - 1]) + x;
  }
  const std::uint64_t ps_want = gpm::checksum64(sums.data(), sums.size() * sizeof(sums[0]));
  std::uint64_t bfs_want = 0, srad_want = 0;
  for (const way w : kPoolWays) {
    b.how = s.how = p.how = w;
    const std::string m = mode_name(w);
    const run_summary rb = run_bfs("b-" + m, options_for(d), b, false);
    const run_summary rs = run_srad("s-" + m, options_for(d), s, false);
    const run_summary rp = run_prefix_sum("p-" + m, options_for(d), p, false);
    if (w == way::gpm) {
      bfs_want = rb.output_checksum;
      srad_want = rs.output_checksum;
    }
    EXPECT_EQ(rb.output_checksum, bfs_want) << m;
#if GPM_BACKEND_HOST
    // One compiler for kernels and CPU code: bit-identical images. With nvcc, floating-point
    // contraction may differ between the GPU and the CPU implementation.
    EXPECT_EQ(rs.output_checksum, srad_want) << m;
#else
    if (w != way::cpu) EXPECT_EQ(rs.output_checksum, srad_want) << m;
#endif
    EXPECT_EQ(rp.output_checksum, ps_want) << m;
    EXPECT_EQ(rp.steps_run, 2u * p.arrays * p.elements / kScanBlock) << m;
    EXPECT_EQ(rs.steps_total, s.iterations + 1) << m;
  }
}

// ---- resumption and validation ----------------------------------------------------------------

TEST(NativeRun, ResumingAFinishedRunDoesNothing) {
  gpm::test::scratch_dirs d("native-finished");
  prefix_sum_config p;
  p.arrays = 2;
  p.elements = 512;
  p.geo = kGeo;
  const run_summary first = run_prefix_sum("p.pool", options_for(d), p, false);
  const run_summary again = run_prefix_sum("p.pool", options_for(d), p, true);
  EXPECT_EQ(again.output_checksum, first.output_checksum);
  EXPECT_EQ(again.steps_run, 0u);
  EXPECT_EQ(again.steps_at_start, again.steps_total);
}

TEST(NativeRun, ResumeValidatesThePool) {
  gpm::test::scratch_dirs d("native-validate");
  srad_config s;
  s.rows = 16;
  s.cols = 16;
  s.iterations = 2;
  s.geo = kGeo;
  run_srad("s.pool", options_for(d), s, false);

  srad_config other = s;
  other.iterations = 3;
  gpm::error e = error_of([&] { run_srad("s.pool", options_for(d), other, true); });
  EXPECT_EQ(e.code(), gpm::errc::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("other parameters"), std::string::npos) << e.what();

  e = error_of([&] { run_bfs("s.pool", options_for(d), bfs_config{}, true); });
  EXPECT_EQ(e.code(), gpm::errc::not_found) << e.what();

  e = error_of([&] { run_srad("missing.pool", options_for(d), s, true); });
  EXPECT_EQ(e.code(), gpm::errc::not_found) << e.what();

  srad_config fs = s;
  fs.how = way::cap_fs;
  e = error_of([&] { run_srad("fs.pool", options_for(d), fs, false); });
  EXPECT_EQ(e.code(), gpm::errc::invalid_argument);

  // A damaged header is refused, whichever byte is wrong.
  {
    gpm::pool p = gpm::pool::open("s.pool", kLayout, options_for(d));
    const gpm::pool_object h = p.get("srad.header");
    p.host_ptr<unsigned char>(h.offset)[24] ^= 1;
  }
  e = error_of([&] { run_srad("s.pool", options_for(d), s, true); });
  EXPECT_EQ(e.code(), gpm::errc::corrupt) << e.what();
}

}  // namespace
