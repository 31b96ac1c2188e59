// Tests of the crash-image checker itself (gpm/platform/crash_image.hpp) on a plain buffer: which
// lines persists make durable, which images a crash point yields, the report of a rejected
// image, the budget, the crash point filter, disabled persist sites, adopting a mapping, and the
// errors of arming. Host code, the same on both backends; tests/pool/pool_crash_image_test.cpp
// puts it to work on the pool allocator.
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

constexpr std::size_t kLine = 64;
constexpr std::size_t kLines = 16;

struct alignas(kLine) buffer {
  std::array<char, kLine * kLines> bytes{};
  char* line(std::size_t l) { return bytes.data() + l * kLine; }
};

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Records every image the checker hands to the check, and accepts them all unless told to.
class image_log {
 public:
  explicit image_log(const std::string& tag) : dirs_(tag) {}
  gpm::crash_image_options options() const {
    gpm::crash_image_options o;
    o.image_path = dirs_.pool_path("image");
    return o;
  }
  gpm::crash_image_check check(std::function<std::string(const std::vector<char>&)> judge = {}) {
    return [this, judge](const std::string& path) {
      images.push_back(read_file(path));
      return judge ? judge(images.back()) : std::string();
    };
  }
  std::vector<std::vector<char>> images;

 private:
  gpm::test::scratch_dirs dirs_;
};

char line_byte(const std::vector<char>& image, std::size_t l) { return image.at(l * kLine); }

TEST(CrashImage, RangePersistMakesWholeLinesDurable) {
  buffer b;
  image_log log("crash-image-range");
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), log.options());
  b.line(0)[10] = 'a';
  b.line(2)[0] = 'b';
  gpm::persist(b.line(0) + 10, 1);  // one byte: its whole line becomes durable
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 2u);  // line 2 lost or kept
  for (const auto& image : log.images) {
    ASSERT_EQ(image.size(), b.bytes.size());
    EXPECT_EQ(image[10], 'a');
  }
  EXPECT_EQ(line_byte(log.images[0], 2), 0);
  EXPECT_EQ(line_byte(log.images[1], 2), 'b');
  EXPECT_FALSE(checker.failure());
  EXPECT_EQ(checker.stats().explorations, 1u);
  EXPECT_EQ(checker.stats().most_dirty_lines, 1u);
}

TEST(CrashImage, FenceMakesEveryLineDurable) {
  buffer b;
  image_log log("crash-image-fence");
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), log.options());
  b.line(1)[0] = 'x';
  b.line(3)[5] = 'y';
  gpm::persist();
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 1u);
  EXPECT_EQ(std::memcmp(log.images[0].data(), b.bytes.data(), b.bytes.size()), 0);
}

TEST(CrashImage, TheFirstRejectedImageIsReportedAndEndsExploration) {
  buffer b;
  image_log log("crash-image-reject");
  char want = 0;  // what line 2 must hold in every image
  gpm::crash_image_checker checker(
      b.bytes.data(), b.bytes.size(), log.check([&want](const std::vector<char>& image) {
        return line_byte(image, 2) == want ? "" : std::string("line 2 was lost");
      }),
      log.options());
  gpm::crash_point("t.point");  // nothing dirty: one image, the durable one, accepted
  EXPECT_EQ(log.images.size(), 1u);
  b.line(2)[0] = want = 'n';
  gpm::persist(b.line(2), kLine);
  b.line(3)[0] = 'm';  // never persisted
  b.line(2)[0] = 'o';  // a store to line 2 and back, unpersisted: not dirty
  b.line(2)[0] = 'n';
  gpm::crash_point("t.point");  // only line 3 is dirty: two images, accepted
  EXPECT_EQ(log.images.size(), 3u);
  EXPECT_FALSE(checker.failure());
  b.line(2)[0] = want = 'p';  // dirty, and the check needs it
  gpm::crash_point("t.point");
  const auto f = checker.failure();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->crash_point, "t.point");
  EXPECT_EQ(f->hit, 3u);
  EXPECT_EQ(f->lost, (std::vector<std::uint64_t>{2 * kLine, 3 * kLine}));
  EXPECT_TRUE(f->kept.empty());
  EXPECT_EQ(f->message, "line 2 was lost");
  EXPECT_NE(f->describe().find("crash point t.point (hit 3)"), std::string::npos) << f->describe();
  EXPECT_NE(f->describe().find("0x80, 0xc0"), std::string::npos) << f->describe();
  const std::size_t images = log.images.size();
  gpm::crash_point("t.point");
  EXPECT_EQ(log.images.size(), images) << "exploration goes on after a failure";
}

TEST(CrashImage, ManyDirtyLinesGiveAllLostAllKeptAndRandomImages) {
  buffer b;
  image_log log("crash-image-random");
  gpm::crash_image_options o = log.options();
  o.exhaustive_lines = 4;
  o.random_images = 5;
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), o);
  for (std::size_t l = 0; l < 12; ++l) b.line(l)[0] = 'z';
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 7u);
  for (std::size_t l = 0; l < 12; ++l) {
    EXPECT_EQ(line_byte(log.images[0], l), 0) << "the first image loses every dirty line";
    EXPECT_EQ(line_byte(log.images[1], l), 'z') << "the second keeps every dirty line";
  }
  EXPECT_EQ(checker.stats().most_dirty_lines, 12u);
}

TEST(CrashImage, ExplorationStopsAtTheBudget) {
  buffer b;
  image_log log("crash-image-budget");
  gpm::crash_image_options o = log.options();
  o.max_images = 3;
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), o);
  for (std::size_t l = 0; l < 3; ++l) b.line(l)[0] = 'q';  // 8 images wanted
  gpm::crash_point("t.point");
  gpm::crash_point("t.point");
  EXPECT_EQ(log.images.size(), 3u);
  EXPECT_EQ(checker.stats().images, 3u);
}

TEST(CrashImage, OnlyTheNamedCrashPointsAreExplored) {
  buffer b;
  image_log log("crash-image-filter");
  gpm::crash_image_options o = log.options();
  o.crash_points = {"t.wanted"};
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), o);
  gpm::crash_point("t.other");
  EXPECT_TRUE(log.images.empty());
  gpm::crash_point("t.wanted");
  EXPECT_EQ(log.images.size(), 1u);
}

TEST(CrashImage, ADisabledPersistSiteDoesNothing) {
  buffer b;
  image_log log("crash-image-site");
  gpm::crash_image_options o = log.options();
  o.disabled_site = "t.site.off";
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), o);
  b.line(0)[0] = 'd';
  b.line(1)[0] = 'e';
  gpm::persist_at("t.site.off", b.line(0), kLine);
  gpm::persist_at("t.site.on", b.line(1), kLine);
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 2u);  // line 0 is still dirty, line 1 is durable
  EXPECT_EQ(line_byte(log.images[0], 0), 0);
  EXPECT_EQ(line_byte(log.images[0], 1), 'e');
  const gpm::crash_image_stats s = checker.stats();
  EXPECT_EQ(s.site_hits.at("t.site.off"), 1u);
  EXPECT_EQ(s.site_hits.at("t.site.on"), 1u);
}

// The fence form of a site: disabled, it leaves every dirty line dirty; enabled, none.
TEST(CrashImage, ADisabledFenceSiteDoesNothing) {
  buffer b;
  image_log log("crash-image-fence-site");
  gpm::crash_image_options o = log.options();
  o.disabled_site = "t.fence.off";
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), o);
  b.line(2)[0] = 'h';
  gpm::persist_at("t.fence.off");
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 2u);  // line 2 lost, line 2 kept
  gpm::persist_at("t.fence.on");
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 3u);  // nothing dirty: the durable image alone
  EXPECT_EQ(line_byte(log.images[2], 2), 'h');
  EXPECT_EQ(checker.stats().site_hits.at("t.fence.off"), 1u);
}

// persist_later_at names each range as it is stored (host code: the lines become durable at
// once); persist_named_at, the fence a GPU makes after the run, carries no other line along.
TEST(CrashImage, RangesPersistedLaterAreNamedOneByOne) {
  buffer b;
  image_log log("crash-image-later");
  gpm::crash_image_checker checker(b.bytes.data(), b.bytes.size(), log.check(), log.options());
  b.line(0)[0] = 'p';
  b.line(1)[0] = 'q';  // stored by someone else, never persisted
  b.line(2)[0] = 'r';
  gpm::persist_later_at("t.later", b.line(0), kLine);
  gpm::persist_later_at("t.later", b.line(2), kLine);
  gpm::persist_named_at("t.later");
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 2u);  // line 1 lost, line 1 kept
  for (const auto& image : log.images) {
    EXPECT_EQ(line_byte(image, 0), 'p');
    EXPECT_EQ(line_byte(image, 2), 'r');
  }
  EXPECT_EQ(checker.stats().site_hits.at("t.later"), 2u);
}

TEST(CrashImage, AdoptsTheNextMappingUntilItIsUnmapped) {
  buffer b;
  image_log log("crash-image-adopt");
  gpm::crash_image_checker checker(log.check(), log.options());
  gpm::crash_point("t.point");
  EXPECT_TRUE(log.images.empty()) << "nothing to explore before a mapping is adopted";
  b.line(4)[0] = 'f';  // before the mapping is reported: counts as durable
  gpm::crash_image_mapped(b.bytes.data(), b.bytes.size());
  b.line(5)[0] = 'g';
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 2u);
  EXPECT_EQ(line_byte(log.images[0], 4), 'f');
  EXPECT_EQ(line_byte(log.images[0], 5), 0);
  buffer other;
  gpm::crash_image_mapped(other.bytes.data(), other.bytes.size());  // only the first is adopted
  gpm::crash_image_unmapped(b.bytes.data());
  gpm::crash_point("t.point");
  EXPECT_EQ(log.images.size(), 2u);
}

// A file mapped twice: the checker follows the file it adopted, with the durable image it kept.
TEST(CrashImage, FollowsTheAdoptedFileWhenItIsMappedAgain) {
  image_log log("crash-image-follow");
  const std::string path = log.options().image_path + ".data";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kLine * kLines), 0);
  auto map = [fd] {
    return static_cast<char*>(
        ::mmap(nullptr, kLine * kLines, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  };
  gpm::crash_image_checker checker(log.check(), log.options());
  char* first = map();
  gpm::crash_image_mapped(first, kLine * kLines, fd);
  first[0] = 'a';
  gpm::persist(first, 1);
  first[kLine] = 'b';  // never persisted
  gpm::crash_image_unmapped(first);
  ::munmap(first, kLine * kLines);
  buffer other;  // another range, not a file: not adopted
  gpm::crash_image_mapped(other.bytes.data(), other.bytes.size());
  gpm::crash_point("t.point");
  EXPECT_TRUE(log.images.empty()) << "nothing is mapped";
  gpm::crash_image_unmapped(other.bytes.data());
  char* second = map();
  gpm::crash_image_mapped(second, kLine * kLines, fd);
  gpm::crash_point("t.point");
  ASSERT_EQ(log.images.size(), 2u);  // line 1 is still dirty
  EXPECT_EQ(line_byte(log.images[0], 0), 'a');
  EXPECT_EQ(line_byte(log.images[0], 1), 0);
  EXPECT_EQ(line_byte(log.images[1], 1), 'b');
  gpm::crash_image_unmapped(second);
  ::munmap(second, kLine * kLines);
  ::close(fd);
}

TEST(CrashImage, ArmingErrors) {
  buffer b;
  image_log log("crash-image-errors");
  gpm::test::expect_error(gpm::errc::invalid_argument, "range to check is empty", [&] {
    gpm::crash_image_checker c(nullptr, 64, log.check(), log.options());
  });
  gpm::test::expect_error(gpm::errc::invalid_argument, "no check", [&] {
    gpm::crash_image_checker c(b.bytes.data(), b.bytes.size(), {}, log.options());
  });
  gpm::test::expect_error(gpm::errc::invalid_argument, "no image path", [&] {
    gpm::crash_image_checker c(b.bytes.data(), b.bytes.size(), log.check(), {});
  });
  gpm::test::expect_error(gpm::errc::invalid_argument, "exhaustive_lines is 21", [&] {
    gpm::crash_image_options o = log.options();
    o.exhaustive_lines = 21;
    gpm::crash_image_checker c(log.check(), o);
  });
  gpm::crash_image_checker armed(b.bytes.data(), b.bytes.size(), log.check(), log.options());
  gpm::test::expect_error(gpm::errc::busy, "armed already", [&] {
    gpm::crash_image_checker c(b.bytes.data(), b.bytes.size(), log.check(), log.options());
  });
}

TEST(CrashImage, UnarmedHooksChangeNothing) {
  buffer b;
  b.line(0)[0] = 'u';
  gpm::persist_at("t.site", b.line(0), kLine);
  gpm::crash_image_mapped(b.bytes.data(), b.bytes.size());
  gpm::crash_image_unmapped(b.bytes.data());
  gpm::crash_point("t.point");
  EXPECT_EQ(b.line(0)[0], 'u');
}

}  // namespace
