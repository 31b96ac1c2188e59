// Conformance, kernel crash points: a process started with GPMKIT_CRASH_POINT=name:n dies by
// SIGKILL at the n-th time a kernel thread reaches kernel_crash_point(kernel_crash_points(), name);
// what the thread stored before the point is in host memory, what it would store after it never
// is, and other names do not count. Same expectations on both backends (on a GPU the thread
// stops and a host thread kills the process; gpm/platform/crash_point.hpp).
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

constexpr int kSteps = 10;
constexpr std::size_t kFileBytes = 4096;

// One thread: before each hit of the counted point it marks the step and persists it; another
// point is reached on every step too.
__global__ void step_through_points(std::uint64_t* marks, gpm::kernel_crash_ref armed) {
  for (int k = 0; k < kSteps; ++k) {
    gpm::kernel_crash_point(armed, "conformance.kernel.other");
    marks[k] = 1;
    gpm::persist();
    gpm::kernel_crash_point(armed, "conformance.kernel.step");
  }
}

// The marks file mapped shared: what the child's kernel writes, the parent reads after its death.
class marks_file {
 public:
  explicit marks_file(const std::string& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, kFileBytes) != 0) {
      gpm::throw_error(gpm::errc::io, "cannot create " + path);
    }
    void* p = mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) gpm::throw_error(gpm::errc::io, "cannot map " + path);
    words_ = static_cast<std::uint64_t*>(p);
  }
  ~marks_file() { munmap(words_, kFileBytes); }
  marks_file(const marks_file&) = delete;
  marks_file& operator=(const marks_file&) = delete;

  std::uint64_t* words() const { return words_; }
  std::vector<std::uint64_t> marks() const { return {words_, words_ + kSteps}; }

 private:
  std::uint64_t* words_ = nullptr;
};

GPM_CRASH_SCENARIO(kernel_crash_point_steps) {
  marks_file file(args.pool_path);
  gpm::check_cuda(cudaHostRegister(file.words(), kFileBytes, cudaHostRegisterMapped),
                  "cudaHostRegister");
  void* device = nullptr;
  gpm::check_cuda(cudaHostGetDevicePointer(&device, file.words(), 0), "cudaHostGetDevicePointer");
  gpm::launch(step_through_points, 1, 1, 0, nullptr, static_cast<std::uint64_t*>(device),
              gpm::kernel_crash_points());
  gpm::check_cuda(cudaDeviceSynchronize(), "step_through_points");
  gpm::check_cuda(cudaHostUnregister(file.words()), "cudaHostUnregister");
  return 0;
}

// Runs the scenario with `armed` as GPMKIT_CRASH_POINT; returns the child and its marks.
std::pair<gpm::test::child_result, std::vector<std::uint64_t>> run_steps(const std::string& armed) {
  gpm::test::scratch_dirs dirs("crash-point");
  const gpm::test::scenario_args args = dirs.args("marks", 1);
  marks_file file(args.pool_path);  // zeros
  auto r = gpm::test::run_child("kernel_crash_point_steps", args, gpm::test::kill_at(armed));
  return {r, file.marks()};
}

TEST(ConformanceCrashPoint, KernelThreadStopsAtTheNthHitAndTheProcessDies) {
  const auto [r, marks] = run_steps("conformance.kernel.step:4");
  ASSERT_TRUE(r.killed) << r.describe();
  EXPECT_FALSE(r.killed_by_parent) << r.describe();
  const std::vector<std::uint64_t> want = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(marks, want) << "the steps before the 4th hit are stored, none after it";
}

TEST(ConformanceCrashPoint, KernelRunsThroughPointsOfOtherNames) {
  const auto [r, marks] = run_steps("conformance.kernel.unreached");
  ASSERT_FALSE(r.killed) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(marks, std::vector<std::uint64_t>(kSteps, 1));
}

TEST(ConformanceCrashPoint, NamesHashApart) {
  EXPECT_NE(gpm::crash_point_hash("conformance.kernel.step"),
            gpm::crash_point_hash("conformance.kernel.other"));
}

TEST(ConformanceCrashPoint, UnarmedProcessGivesKernelsNoRecord) {
  EXPECT_EQ(gpm::kernel_crash_points().record, nullptr);
}

}  // namespace
