// gpm::ooc unit tests on both backends: every mode's data movement (fetch, write-back, dropped
// clean lines, write-only masks, volatile spills), element and line access and their statuses,
// create, several mappings at once, unaligned ranges, sync / prefetch / unmap / stats, read-ahead,
// and each bad input's error.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>

#include "ooc_test_util.hpp"

namespace {

using namespace gpm::test::ooc;
using gpm::ooc::mapping;
using gpm::ooc::mapping_options;

struct files {
  gpm::test::scratch_dirs dirs{"ooc"};
  std::string disk(const std::string& name) const { return dirs.snapshot_dir() + "/" + name; }
  std::string tmpfs(const std::string& name) const { return dirs.pm_dir() + "/" + name; }
};

// ---- data movement per mode -----------------------------------------------------------------

TEST(OocMapping, ReadWriteFetchesAndWritesBack) {
  files f;
  const std::string path = f.disk("rw.bin");
  const auto bytes = pattern(256 * 1024, 1);
  write_file(path, bytes);
  auto expect = as<std::uint32_t>(bytes);
  {
    mapping m(path, bytes.size(), 0, tiny(mode::read_write));
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
    EXPECT_GT(s.gpu_evictions, 0u);  // 64 lines through an 8-line GPU cache
    EXPECT_GT(s.file_bytes_written, 0u);  // and a 6-line host cache
    m.sync();
    EXPECT_EQ(as<std::uint32_t>(read_file(path)), expect);
    EXPECT_EQ(m.stats().syncs, 1u);
  }
  EXPECT_EQ(as<std::uint32_t>(read_file(path)), expect);
}

}  // namespace
