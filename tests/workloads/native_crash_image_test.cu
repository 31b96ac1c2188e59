// Crash-image tests of the native-persistence workloads (bfs, srad, prefix_sum): the gpm way,
// whose kernels persist their results and whose grid's last block publishes the progress word,
// and the baselines (cpu, gpm-ndp, cap-mm), whose host makes each step durable
// (gpm/platform/crash_image.hpp, docs/crash-checking.md). A small run goes under the checker,
// which adopts its pool as the run creates it. The run is crashed after each step's kernels
// (native.step.computed: in gpm-ndp the step's results are stored but not yet written back) and
// after each step it reports durable (workload.step_durable, from its progress callback); there
// the checker writes each crash image (the persisted lines plus any subset of the unpersisted
// ones). The check is the workload's own recovery: it resumes the run on the image to its end
// (run_bfs, run_srad, run_prefix_sum with resume = true) and requires
//   - every progress word the run published to be durable (the image's word is the live one),
//   - nothing reported durable to be lost (the resumed run starts at or after it),
//   - only missing work to be redone (steps run = steps of the run - steps found durable),
//   - the final output to equal an uninterrupted run's, bit for bit (so the results of the steps
//     found durable were complete).
// With every persist site present no image fails; with any one of the gpm way's sites disabled
// (a mutation: the persist deleted), some image fails, except native.srad.coefficient, which
// recovery does not need (see its test). Trials: GPMKIT_CRASH_TRIALS problems with different
// seeds (2 by default, more in crash-long).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/pool.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "scratch_pool.hpp"
#include "workloads/native/native.hpp"

namespace {

using namespace gpmbench::native;

constexpr char kCrashPoint[] = "workload.step_durable";
constexpr char kPool[] = "run.pool";
constexpr gpmbench::geometry kGeo{2, 64};

// One workload's run on a problem chosen by `seed`, small enough that each crash image is resumed
// in a few milliseconds on the emulator.
using runner =
    std::function<run_summary(const std::string& path, const gpm::pool_options&, std::uint64_t seed,
                              way how, bool resume, const progress_fn&)>;

struct native_case {
  const char* workload;  // also the prefix of its pool objects' names
  runner run;
};

const native_case kBfs{"bfs", [](const std::string& path, const gpm::pool_options& o,
                                 std::uint64_t seed, way how, bool resume, const progress_fn& f) {
                         bfs_config c;
                         c.width = 8;
                         c.height = 6;
                         c.extra_roads = 6;
                         c.seed = seed;
                         c.geo = kGeo;
                         c.how = how;
                         return run_bfs(path, o, c, resume, f);
                       }};
const native_case kSrad{"srad", [](const std::string& path, const gpm::pool_options& o,
                                   std::uint64_t seed, way how, bool resume, const progress_fn& f) {
                          srad_config c;
                          c.rows = 16;
                          c.cols = 16;
                          c.iterations = 3;
                          c.seed = seed;
                          c.geo = kGeo;
                          c.how = how;
                          return run_srad(path, o, c, resume, f);
                        }};
const native_case kPrefixSum{
    "prefix_sum", [](const std::string& path, const gpm::pool_options& o, std::uint64_t seed,
                     way how, bool resume, const progress_fn& f) {
      prefix_sum_config c;
      c.arrays = 2;
      c.elements = 2 * kScanBlock;
      c.seed = seed;
      c.geo = kGeo;
      c.how = how;
      return run_prefix_sum(path, o, c, resume, f);
    }};

gpm::pool_options options_for(const gpm::test::scratch_dirs& d) {
  return gpm::test::image_options(d);
}

// What the run has told the test: the steps it reported durable last.
struct run_model {
  std::uint64_t reported = 0;
};

// The progress word of the run in the pool file at `path`, read from the file itself (for the
// live pool: what the run has published, durable or not), at the word's offset in `image`.
std::uint64_t word_in_file(const std::string& path, std::uint64_t offset) {
  std::uint64_t word = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::pread(fd, &word, sizeof word, static_cast<off_t>(offset)) ==
                                 static_cast<ssize_t>(sizeof word);
  if (fd >= 0) ::close(fd);
  if (!ok) gpm::throw_error(gpm::errc::io, "cannot read the progress word of " + path);
  return word;
}

// Recovers the image by resuming its run and checks the invariants of the file comment.
std::string check_image(const std::string& image, const gpm::pool_options& o, const native_case& c,
                        std::uint64_t seed, way how, const std::string& live,
                        const run_summary& ref, const run_model& m) {
  std::uint64_t word_offset = 0;
  {
    gpm::pool p = gpm::pool::open(image, kLayout, o);
    const auto progress = p.find(std::string(c.workload) + ".progress");
    if (!progress) return "the image holds no progress word";
    word_offset = progress->offset;
  }
  const std::uint64_t durable = word_in_file(image, word_offset);
  const std::uint64_t published = word_in_file(live, word_offset);
  if (durable != published) {
    return "the durable progress word is " + std::to_string(durable) + ", the run published " +
           std::to_string(published);
  }
  const run_summary r = c.run(image, o, seed, how, true, {});
  if (r.steps_at_start < m.reported) {
    return "the resumed run found " + std::to_string(r.steps_at_start) +
           " steps durable, the run had reported " + std::to_string(m.reported);
  }
  if (r.steps_total != ref.steps_total || r.steps_run != r.steps_total - r.steps_at_start) {
    return "the resumed run computed " + std::to_string(r.steps_run) + " steps, found " +
           std::to_string(r.steps_at_start) + " durable, of " + std::to_string(r.steps_total) +
           " (an uninterrupted run has " + std::to_string(ref.steps_total) + ")";
  }
  if (r.output_checksum != ref.output_checksum) {
    return "the resumed run's output differs from an uninterrupted run's";
  }
  return "";
}

struct run_result {
  std::optional<gpm::crash_image_failure> failure;
  gpm::crash_image_stats stats;
};

// Runs workload `c` the way `how` on problem `seed` under a checker (with `disabled_site`
// disabled, `random_images` images where the dirty lines are too many for every subset), crashing
// it after each step's kernels and after each step it reports durable.
run_result check_run(const native_case& c, std::uint64_t seed, way how,
                     const std::string& disabled_site = "", std::size_t random_images = 8) {
  gpm::test::scratch_dirs ref_dirs(std::string("native-image-ref-") + c.workload);
  const run_summary ref = c.run(kPool, options_for(ref_dirs), seed, how, false, {});

  gpm::test::scratch_dirs d(std::string("native-image-") + c.workload);
  const gpm::pool_options o = options_for(d);
  run_model m;
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = {kCrashPoint, "native.step.computed"};
  co.random_images = random_images;
  co.seed = seed;
  co.disabled_site = disabled_site;
  const std::string live = d.pool_path(kPool);
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return check_image(image, o, c, seed, how, live, ref, m); },
      co);
  const run_summary r =
      c.run(kPool, o, seed, how, false, [&](std::uint64_t steps, const std::string&) {
        m.reported = steps;
        gpm::crash_point(kCrashPoint);
      });
  EXPECT_EQ(r.output_checksum, ref.output_checksum) << c.workload << " seed " << seed;
  return {checker.failure(), checker.stats()};
}

std::string test_name(std::string n) {
  for (char& ch : n) ch = ch == '.' ? '_' : ch;
  return n;
}

// ---- every site present: every image resumes ------------------------------------------------

// Every pool-based way: the baselines (cpu, gpm-ndp, cap-mm) make the same data durable at the
// same step boundaries from the host, with gpm::write_back, which the checker's model follows too.
class NativeCrashImage : public ::testing::TestWithParam<std::tuple<native_case, way>> {};

TEST_P(NativeCrashImage, EveryImageResumes) {
  const auto& [c, how] = GetParam();
  const int trials = gpm::test::crash_trials(2);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const run_result r = check_run(c, seed, how, "", trials > 2 ? 64 : 8);
    ASSERT_FALSE(r.failure) << c.workload << " seed " << seed << ": " << r.failure->describe();
    EXPECT_GT(r.stats.explorations, 1u) << "seed " << seed;
    EXPECT_GE(r.stats.images, r.stats.explorations) << "seed " << seed;
    EXPECT_TRUE(r.stats.site_hits.contains("native.store.header")) << "seed " << seed;
    if (how == way::gpm) {
      const std::string publish = std::string("native.") + c.workload + ".publish";
      EXPECT_TRUE(r.stats.site_hits.contains(publish)) << "seed " << seed;
    }
    std::printf(
        "%s %s seed %llu: %llu crash points explored, %llu images, at most %zu dirty "
        "lines\n",
        c.workload, mode_name(how).c_str(), static_cast<unsigned long long>(seed),
        static_cast<unsigned long long>(r.stats.explorations),
        static_cast<unsigned long long>(r.stats.images), r.stats.most_dirty_lines);
  }
}

INSTANTIATE_TEST_SUITE_P(Native, NativeCrashImage,
                         ::testing::Combine(::testing::Values(kBfs, kSrad, kPrefixSum),
                                            ::testing::Values(way::gpm, way::cpu, way::gpm_ndp,
                                                              way::cap_mm)),
                         [](const auto& info) {
                           std::string n = std::string(std::get<0>(info.param).workload) + "_" +
                                           mode_name(std::get<1>(info.param));
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

// ---- each site removed: some image fails -----------------------------------------------------

struct site_case {
  const char* site;
  const native_case* workload;  // the run that reaches it first with nothing else persisting
};

class NativePersistSite : public ::testing::TestWithParam<site_case> {};

TEST_P(NativePersistSite, RemovalIsCaught) {
  const site_case& s = GetParam();
  const run_result r = check_run(*s.workload, 1, way::gpm, s.site);
  EXPECT_TRUE(r.stats.site_hits.contains(s.site)) << "the run never reached " << s.site;
  ASSERT_TRUE(r.failure) << "no crash image failed without " << s.site << " (" << r.stats.images
                         << " images)";
  std::printf("without %s: %s\n", s.site, r.failure->describe().c_str());
}

// native.store.header is caught by prefix_sum, whose first crash point (the run's start) comes
// before any kernel: in bfs and srad, the init kernel's fences make every line durable first.
INSTANTIATE_TEST_SUITE_P(Native, NativePersistSite,
                         ::testing::Values(site_case{"native.store.header", &kPrefixSum},
                                           site_case{"native.bfs.init", &kBfs},
                                           site_case{"native.bfs.level", &kBfs},
                                           site_case{"native.bfs.publish", &kBfs},
                                           site_case{"native.srad.init", &kSrad},
                                           site_case{"native.srad.image", &kSrad},
                                           site_case{"native.srad.publish", &kSrad},
                                           site_case{"native.prefix_sum.value", &kPrefixSum},
                                           site_case{"native.prefix_sum.last_value", &kPrefixSum},
                                           site_case{"native.prefix_sum.record", &kPrefixSum},
                                           site_case{"native.prefix_sum.publish", &kPrefixSum}),
                         [](const auto& info) { return test_name(info.param.site); });

// SRAD's coefficients are a durable result of each iteration, but recovery never reads them: an
// interrupted iteration is run again from its image, which recomputes them. So without their
// persist every image still resumes to the right output (and in the model the update kernel's
// fences make them durable anyway). The site stays: the paper's SRAD persists them, and on a GPU
// the persist is the same fence.
TEST(NativeCrashImageSrad, CoefficientsAreNotNeededToResume) {
  const run_result r = check_run(kSrad, 1, way::gpm, "native.srad.coefficient");
  EXPECT_TRUE(r.stats.site_hits.contains("native.srad.coefficient"));
  ASSERT_FALSE(r.failure) << r.failure->describe();
}

}  // namespace
