// Host emulator: kernels with barrier or warp-collective bugs fail with a report that names the
// kernel, the block, the threads and where each waits, instead of hanging; the fault is sticky
// until cudaDeviceReset, as on a GPU.
#include <gpm/platform/emulator.hpp>
#include <gpm/platform/kernel.cuh>

#include <stdexcept>
#include <string>

#include "gpm_test.hpp"

namespace {

class EmuFaults : public ::testing::Test {
 protected:
  void TearDown() override { cudaDeviceReset(); }

  // Runs the launch, expects a launch failure and returns the fault report.
  template <class F>
  std::string expect_fault(F&& launch) {
    launch();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    return gpm::emu::last_fault_report();
  }
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

__global__ void divergent_syncthreads(int* out) {
  if (threadIdx.x < 64) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

TEST_F(EmuFaults, DivergentSyncthreadsIsReported) {
  gpm::device_buffer<int> d(128);
  const std::string r =
      expect_fault([&] { gpm::launch(divergent_syncthreads, 2, 128, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "divergent barrier")) << r;
  EXPECT_TRUE(contains(r, "divergent_syncthreads")) << r;
  EXPECT_TRUE(contains(r, "block (")) << r;
  EXPECT_TRUE(contains(r, "emu_faults.cu")) << r;
  EXPECT_TRUE(contains(r, "thread (64,0,0)")) << r;
}

__global__ void lane_waits_at_barrier(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 32 == 5) {
    __syncthreads();
  } else {
    v = __shfl_sync(0xffffffffu, v, 0);
  }
  out[threadIdx.x] = v;
}

TEST_F(EmuFaults, LaneMissingFromMaskIsADeadlock) {
  gpm::device_buffer<int> d(32);
  const std::string r =
      expect_fault([&] { gpm::launch(lane_waits_at_barrier, 1, 32, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "deadlock")) << r;
  EXPECT_TRUE(contains(r, "lane_waits_at_barrier")) << r;
  EXPECT_TRUE(contains(r, "__shfl_sync(mask 0xffffffff)")) << r;
  EXPECT_TRUE(contains(r, "for lanes 5 of warp 0")) << r;
  EXPECT_TRUE(contains(r, "thread (5,0,0): wait in __syncthreads")) << r;
}

__global__ void overlapping_masks(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  unsigned r = 0;
  if (lane < 16) {
    r = __ballot_sync(0x0000ffffu, 1);
  } else {
    r = __ballot_sync(0xffffff00u, 1);
  }
  __syncwarp();
  out[threadIdx.x] = r;
}

TEST_F(EmuFaults, OverlappingMasksAreReported) {
  gpm::device_buffer<unsigned> d(32);
  const std::string r =
      expect_fault([&] { gpm::launch(overlapping_masks, 1, 32, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "disagree on a warp collective's mask")) << r;
}

__global__ void mixed_collectives(unsigned* out) {
  unsigned r = 0;
  if (threadIdx.x % 2 == 0) {
    r = __ballot_sync(0xffffffffu, 1);
  } else {
    r = static_cast<unsigned>(__any_sync(0xffffffffu, 1));
  }
  out[threadIdx.x] = r;
}

TEST_F(EmuFaults, DifferentCollectivesWithOneMaskAreReported) {
  gpm::device_buffer<unsigned> d(32);
  const std::string r =
      expect_fault([&] { gpm::launch(mixed_collectives, 1, 32, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "__any_sync")) << r;
  EXPECT_TRUE(contains(r, "__ballot_sync")) << r;
}

__global__ void caller_not_in_mask(unsigned* out) { out[threadIdx.x] = __ballot_sync(0x1u, 1); }

TEST_F(EmuFaults, CallerOutsideItsMaskIsReported) {
  gpm::device_buffer<unsigned> d(4);
  const std::string r =
      expect_fault([&] { gpm::launch(caller_not_in_mask, 1, 4, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "does not name the calling lane")) << r;
}

__global__ void traps(int* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1;
}

TEST_F(EmuFaults, TrapIsReported) {
  gpm::device_buffer<int> d(8);
  const std::string r = expect_fault([&] { gpm::launch(traps, 1, 8, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "__trap() called")) << r;
  EXPECT_TRUE(contains(r, "thread (3,0,0)")) << r;
}

__global__ void throws(int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 2) throw std::runtime_error("boom from a kernel");
  out[threadIdx.x] = 1;
}

TEST_F(EmuFaults, ExceptionInKernelCodeIsAFault) {
  gpm::device_buffer<int> d(8);
  const std::string r = expect_fault([&] { gpm::launch(throws, 2, 8, 0, nullptr, d.data()); });
  EXPECT_TRUE(contains(r, "boom from a kernel")) << r;
  EXPECT_TRUE(contains(r, "block (1,0,0)")) << r;
}

__global__ void count_then_fault(int* counter) {
  if (blockIdx.x == 0) __trap();
  atomicAdd(counter, 1);
}

TEST_F(EmuFaults, FaultIsStickyAndSkipsRemainingWorkUntilReset) {
  const gpm::emu::options saved = gpm::emu::current_options();
  gpm::emu::options one = saved;
  one.workers = 1;  // blocks run in order: block 0 faults before any other starts
  gpm::emu::set_options(one);
  gpm::device_buffer<int> counter(1);
  counter.fill_bytes(0);
  gpm::launch(count_then_fault, 100, 32, 0, nullptr, counter.data());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // sticky: not cleared by reading
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_THROW(gpm::launch(count_then_fault, 1, 1, 0, nullptr, counter.data()), gpm::error);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(gpm::test::to_host(counter)[0], 0) << "blocks after the faulting one must not run";
  EXPECT_TRUE(gpm::emu::last_fault_report().empty());
  gpm::emu::set_options(saved);
}

}  // namespace
