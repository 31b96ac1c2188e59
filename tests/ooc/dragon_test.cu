// The DRAGON compatibility API (include/gpm/compat/dragon.hpp): each flag's data movement with
// plain device pointers, range sync, and every failure returned as a code with a message (the
// mapping that does not fit in GPU memory says to use gpm::ooc::array).
#include <gpm/compat/dragon.hpp>

#include <unistd.h>

#include <filesystem>

#include "ooc_test_util.hpp"

namespace {

using namespace gpm::test::ooc;

struct files {
  gpm::test::scratch_dirs dirs{"dragon"};
  std::string path(const std::string& name) const { return dirs.snapshot_dir() + "/" + name; }
};

__global__ void add_one(float* x, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n)) x[i] += 1.0f;
}

std::vector<float> floats(std::size_t n, float from) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from + static_cast<float>(i);
  return v;
}

std::vector<unsigned char> bytes_of(const std::vector<float>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Maps, runs add_one over the mapping, and unmaps; returns the file's floats afterwards.
std::vector<float> add_one_through(const std::string& path, std::size_t n, unsigned short flags) {
  void* p = nullptr;
  EXPECT_EQ(dragon_map(path.c_str(), n * sizeof(float), 0, flags, &p), D_OK)
      << dragon_error_message();
  gpm::launch(add_one, 4, 128, 0, nullptr, static_cast<float*>(p), std::uint64_t{n});
  EXPECT_EQ(dragon_unmap(p), D_OK) << dragon_error_message();
  return as<float>(read_file(path));
}

TEST(Dragon, EachFlagMovesTheDataItPromises) {
  files f;
  const std::size_t n = 10000;
  const auto start = floats(n, 1.0f);
  const std::string path = f.path("data.bin");
  write_file(path, bytes_of(start));
  auto plus_one = start;
  for (float& x : plus_one) x += 1.0f;

  EXPECT_EQ(add_one_through(path, n, 0), plus_one);  // read and write
  EXPECT_EQ(add_one_through(path, n, D_READ | D_WRITE), floats(n, 3.0f));
  EXPECT_EQ(add_one_through(path, n, D_READ), floats(n, 3.0f));      // never written back
  EXPECT_EQ(add_one_through(path, n, D_VOLATILE), floats(n, 3.0f));  // never written back
  // Write-only: not read (starts at zero), the whole range written back.
  EXPECT_EQ(add_one_through(path, n, D_WRITE), std::vector<float>(n, 1.0f));
  // Write-only creates an output file.
  EXPECT_EQ(add_one_through(f.path("new.bin"), n, D_WRITE), std::vector<float>(n, 1.0f));
  // Volatile data without a file starts at zero.
  void* p = nullptr;
  ASSERT_EQ(dragon_map(f.path("none.bin").c_str(), 4096, 0, D_VOLATILE, &p), D_OK);
  std::vector<unsigned char> back(4096, 1);
  gpm::check_cuda(cudaMemcpy(back.data(), p, 4096, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(back, std::vector<unsigned char>(4096, 0));
  EXPECT_EQ(dragon_sync(p, 4096), D_OK);
  EXPECT_EQ(dragon_unmap(p), D_OK);
  EXPECT_FALSE(std::filesystem::exists(f.path("none.bin")));
}

TEST(Dragon, SyncWritesTheRangeItNames) {
  files f;
  const std::size_t n = 4096;
  const std::string path = f.path("sync.bin");
  write_file(path, bytes_of(floats(n, 0.0f)));
  void* p = nullptr;
  ASSERT_EQ(dragon_map(path.c_str(), n * 4, 0, 0, &p), D_OK) << dragon_error_message();
  gpm::launch(add_one, 4, 128, 0, nullptr, static_cast<float*>(p), std::uint64_t{n});
  auto* x = static_cast<float*>(p);
  ASSERT_EQ(dragon_sync(x + 100, 50 * sizeof(float)), D_OK) << dragon_error_message();
  auto want = floats(n, 0.0f);
  for (std::size_t i = 100; i < 150; ++i) want[i] += 1.0f;
  EXPECT_EQ(as<float>(read_file(path)), want);
  ASSERT_EQ(dragon_unmap(p), D_OK);
  EXPECT_EQ(as<float>(read_file(path)), floats(n, 1.0f));
}

TEST(Dragon, FailuresReturnCodesAndSayWhy) {
  files f;
  const std::string path = f.path("e.bin");
  write_file(path, pattern(8192, 1));
  void* p = reinterpret_cast<void*>(1);
  auto expect = [](dError_t got, dError_t want, const std::string& words) {
    EXPECT_EQ(got, want) << dragon_error_message();
    EXPECT_NE(std::string(dragon_error_message()).find(words), std::string::npos)
        << dragon_error_message();
  };
  expect(dragon_map(f.path("missing").c_str(), 4096, 0, 0, &p), D_ERR_FILE, "does not exist");
  EXPECT_EQ(p, nullptr);
  expect(dragon_map(path.c_str(), 4096, 0, 0x80, &p), D_ERR_ARG, "unknown flags");
  expect(dragon_map(path.c_str(), 4096, -1, 0, &p), D_ERR_ARG, "negative");
  expect(dragon_map(path.c_str(), 4096, 0, 0, nullptr), D_ERR_ARG, "addr is null");
  expect(dragon_map(nullptr, 4096, 0, 0, &p), D_ERR_ARG, "name is null");
  expect(dragon_map(path.c_str(), 8192, 4096, 0, &p), D_ERR_ARG, "fewer than");
  expect(dragon_map(path.c_str(), 0, 0, 0, &p), D_ERR_ARG, "0 bytes");
  expect(dragon_map(f.dirs.snapshot_dir().c_str(), 4096, 0, 0, &p), D_ERR_ARG, "directory");
  expect(dragon_unmap(reinterpret_cast<void*>(16)), D_ERR_ARG, "not an address");
  expect(dragon_sync(reinterpret_cast<void*>(16), 4), D_ERR_ARG, "inside one mapping");

  // A mapping larger than the GPU's memory: DRAGON would page it, gpmkit says what to use.
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  gpm::check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const std::string big = f.path("big.bin");
  write_file(big, {});
  ASSERT_EQ(truncate(big.c_str(), static_cast<off_t>(total_bytes) + 4096), 0);  // sparse
  expect(dragon_map(big.c_str(), total_bytes + 4096, 0, D_READ, &p), D_ERR_TOO_LARGE,
         "gpm::ooc::array");

  // Two writers of one range.
  void* first = nullptr;
  ASSERT_EQ(dragon_map(path.c_str(), 8192, 0, 0, &first), D_OK) << dragon_error_message();
  expect(dragon_map(path.c_str(), 4096, 4096, D_WRITE, &p), D_ERR_BUSY, "overlap");
  expect(dragon_sync(static_cast<char*>(first) + 4096, 8192), D_ERR_ARG, "inside one mapping");
  EXPECT_EQ(dragon_unmap(first), D_OK);
  EXPECT_STREQ(dragon_error_message(), "");
}

}  // namespace
