// Conformance, runtime: stream ordering and asynchrony, async copies and memsets, events and
// elapsed time, cross-stream waits, the legacy default stream, host functions, errors and the
// last-error state, host registration and mapped pointers. Same expectations on both backends.
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/pinned_buffer.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "gpm_test.hpp"

namespace {

__global__ void iota(int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = i;
}

__global__ void scale(int* x, int n, int factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

// Spins for about `ns` nanoseconds of device time, then writes `value`.
__global__ void slow_write(int* x, int n, int value, long long ns) {
  if (threadIdx.x == 0) {
    const long long start = clock64();
    while (clock64() - start < ns) {
    }
  }
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

// clock64() ticks in `ms` milliseconds (SM cycles on a GPU, nanoseconds on the host emulator).
long long ticks_for_ms(int ms) {
  int khz = 0;
  gpm::check_cuda(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute");
  return static_cast<long long>(khz) * ms;
}

TEST(ConformanceRuntime, StreamRunsInOrder) {
  const int n = 10000;
  gpm::stream s;
  gpm::device_buffer<int> d(n);
  int* host = nullptr;
  gpm::check_cuda(cudaMallocHost(&host, n * sizeof(int)), "cudaMallocHost");
  gpm::launch(slow_write, (n + 255) / 256, 256, 0, s, d.data(), n, -1, ticks_for_ms(20));
  gpm::launch(iota, (n + 255) / 256, 256, 0, s, d.data(), n);
  gpm::launch(scale, (n + 255) / 256, 256, 0, s, d.data(), n, 3);
  gpm::check_cuda(cudaMemcpyAsync(host, d.data(), n * sizeof(int), cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync");
  s.synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], 3 * i);
  cudaFreeHost(host);
}

// The kernel waits for a flag that the host sets only after the launch returned: a launch that
// did not return before the kernel finished would time out inside the kernel.
__global__ void wait_for_host(int* flag, int* saw, long long timeout_ticks) {
  gpm::atomic_ref<int, gpm::thread_scope::system> f(*flag);
  const long long start = clock64();
  int value = 0;
  while ((value = f.load(gpm::memory_order_acquire)) == 0 && clock64() - start < timeout_ticks) {
  }
  *saw = value;
}

TEST(ConformanceRuntime, LaunchesAreAsynchronousToTheHost) {
  int* mapped = nullptr;
  gpm::check_cuda(cudaHostAlloc(&mapped, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
  mapped[0] = 0;
  mapped[1] = -1;
  int* dev = nullptr;
  gpm::check_cuda(cudaHostGetDevicePointer(&dev, mapped, 0), "cudaHostGetDevicePointer");
  gpm::stream s;
  gpm::launch(wait_for_host, 1, 1, 0, s, dev, dev + 1, ticks_for_ms(10000));
  std::atomic_ref<int>(mapped[0]).store(42, std::memory_order_release);
  s.synchronize();
  EXPECT_EQ(mapped[1], 42);
  cudaFreeHost(mapped);
}

TEST(ConformanceRuntime, EventsTimeAndOrder) {
  gpm::stream s;
  gpm::event start, stop;
  gpm::device_buffer<int> d(256);
  start.record(s);
  gpm::launch(slow_write, 1, 256, 0, s, d.data(), 256, 5, ticks_for_ms(20));
  stop.record(s);
  stop.synchronize();
  EXPECT_EQ(cudaEventQuery(stop.get()), cudaSuccess);
  const float ms = stop.elapsed_ms_since(start);
  EXPECT_GE(ms, 15.0f);
  EXPECT_LT(ms, 5000.0f);
  for (int v : gpm::test::to_host(d)) EXPECT_EQ(v, 5);
}

// event::done() polls without waiting: false while the work before the record runs (and no
// error left behind for the launch checks that follow), true once it ended.
TEST(ConformanceRuntime, EventDoneReportsWithoutWaiting) {
  gpm::stream s(true);
  gpm::event e;
  EXPECT_TRUE(e.done());  // never recorded
  gpm::device_buffer<int> d(256);
  gpm::launch(slow_write, 1, 256, 0, s, d.data(), 256, 3, ticks_for_ms(200));
  e.record(s);
  EXPECT_FALSE(e.done());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  e.synchronize();
  EXPECT_TRUE(e.done());
  for (int v : gpm::test::to_host(d)) EXPECT_EQ(v, 3);
}

TEST(ConformanceRuntime, StreamWaitEventOrdersTwoStreams) {
  const int n = 4096;
  gpm::stream producer(true), consumer(true);
  gpm::event ready;
  gpm::device_buffer<int> d(n);
  d.fill_bytes(0);
  gpm::launch(slow_write, n / 256, 256, 0, producer, d.data(), n, 7, ticks_for_ms(50));
  ready.record(producer);
  gpm::check_cuda(cudaStreamWaitEvent(consumer, ready.get(), 0), "cudaStreamWaitEvent");
  gpm::launch(scale, n / 256, 256, 0, consumer, d.data(), n, 2);
  consumer.synchronize();
  for (int v : gpm::test::to_host(d)) ASSERT_EQ(v, 14);
}

TEST(ConformanceRuntime, LegacyDefaultStreamWaitsForBlockingStreams) {
  const int n = 4096;
  gpm::stream s;  // blocking: synchronises with the legacy default stream
  gpm::device_buffer<int> d(n);
  d.fill_bytes(0);
  gpm::launch(slow_write, n / 256, 256, 0, s, d.data(), n, 9, ticks_for_ms(50));
  std::vector<int> h(n);
  // cudaMemcpy runs on the legacy default stream, which waits for s.
  gpm::check_cuda(cudaMemcpy(h.data(), d.data(), n * sizeof(int), cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
  for (int v : h) ASSERT_EQ(v, 9);
}

TEST(ConformanceRuntime, HostFunctionRunsInStreamOrder) {
  gpm::stream s;
  gpm::device_buffer<int> d(256);
  int* pinned = nullptr;
  gpm::check_cuda(cudaMallocHost(&pinned, 256 * sizeof(int)), "cudaMallocHost");
  struct ctx {
    int* pinned;
    int sum;
  } c{pinned, -1};
  gpm::launch(slow_write, 1, 256, 0, s, d.data(), 256, 4, ticks_for_ms(10));
  gpm::check_cuda(cudaMemcpyAsync(pinned, d.data(), 256 * sizeof(int), cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync");
  gpm::check_cuda(cudaLaunchHostFunc(
                      s,
                      [](void* p) {
                        auto* k = static_cast<ctx*>(p);
                        int sum = 0;
                        for (int i = 0; i < 256; ++i) sum += k->pinned[i];
                        k->sum = sum;
                      },
                      &c),
                  "cudaLaunchHostFunc");
  s.synchronize();
  EXPECT_EQ(c.sum, 4 * 256);
  cudaFreeHost(pinned);
}

TEST(ConformanceRuntime, AsyncMemsetAndDeviceToDeviceCopy) {
  const int n = 1 << 16;
  gpm::stream s;
  gpm::device_buffer<unsigned char> a(n), b(n);
  gpm::check_cuda(cudaMemsetAsync(a.data(), 0x5a, n, s), "cudaMemsetAsync");
  gpm::check_cuda(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, s),
                  "cudaMemcpyAsync");
  s.synchronize();
  for (unsigned char v : gpm::test::to_host(b)) ASSERT_EQ(v, 0x5a);
}

TEST(ConformanceRuntime, InvalidLaunchThrowsAndClearsLastError) {
  gpm::device_buffer<int> d(16);
  try {
    gpm::launch(iota, 1, 2048, 0, nullptr, d.data(), 16);
    FAIL() << "a 2048-thread block was accepted";
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), gpm::errc::cuda);
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("conformance_runtime.cu"), std::string::npos) << what;
    // Why: the kernel's own limit, from cudaFuncGetAttributes.
    EXPECT_NE(what.find("this kernel takes at most 1024 threads a block"), std::string::npos)
        << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // More dynamic shared memory than the kernel was allowed (no cudaFuncSetAttribute): the limit
  // is named.
  try {
    gpm::launch(iota, 1, 16, std::size_t{64} << 10, nullptr, d.data(), 16);
    FAIL() << "64 KiB of dynamic shared memory were accepted without the attribute";
  } catch (const gpm::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaFuncAttributeMaxDynamicSharedMemorySize"), std::string::npos)
        << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_THROW(gpm::launch(iota, 0, 16, 0, nullptr, d.data(), 16), gpm::error);  // empty grid
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  gpm::launch(iota, 1, 16, 0, nullptr, d.data(), 16);  // the device is still usable
  EXPECT_EQ(gpm::test::to_host(d)[15], 15);
}

TEST(ConformanceRuntime, LastErrorIsSetAndCleared) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::size_t{1} << 55), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
}

TEST(ConformanceRuntime, DeviceProperties) {
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(p.warpSize, 32);
  EXPECT_EQ(p.maxThreadsPerBlock, 1024);
  EXPECT_EQ(p.canMapHostMemory, 1);
  EXPECT_GE(p.major, 7);
  EXPECT_GT(p.multiProcessorCount, 0);
  EXPECT_GT(std::string(p.name).size(), 0u);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_GE(count, 1);
  const gpm::device_info info = gpm::query_device();
  EXPECT_TRUE(info.present);
  EXPECT_EQ(info.emulated, GPM_BACKEND_HOST == 1);
}

// Thread 0 of each block arrives, then waits (about `ns` of device time at most) for every block
// of the grid to have arrived: saw[b] says whether block b saw them all, i.e. ran alongside them.
__global__ void arrive_and_wait(unsigned* arrived, int* saw, long long ns) {
  if (threadIdx.x != 0) return;
  gpm::atomic_ref<unsigned> count(*arrived);
  count.fetch_add(1, gpm::memory_order_relaxed);
  const long long start = clock64();
  while (count.load(gpm::memory_order_relaxed) < gridDim.x && clock64() - start < ns) {
    __nanosleep(1000);
  }
  saw[blockIdx.x] = count.load(gpm::memory_order_relaxed) == gridDim.x ? 1 : 0;
}

// gpm::resident_blocks: a whole number of blocks per multiprocessor (one per worker on the
// emulator), all of which run at once; a shape that cannot run is an error.
TEST(ConformanceRuntime, ResidentBlocksRunAtOnce) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const unsigned blocks = gpm::resident_blocks(arrive_and_wait, 256);
  EXPECT_GE(blocks, static_cast<unsigned>(sms));
  EXPECT_EQ(blocks % static_cast<unsigned>(sms), 0u);
  if (GPM_BACKEND_HOST) {
    EXPECT_EQ(blocks, static_cast<unsigned>(sms));
  }
  gpm::device_buffer<unsigned> arrived(1);
  arrived.fill_bytes(0);
  gpm::device_buffer<int> saw(blocks);
  saw.fill_bytes(0);
  gpm::launch(arrive_and_wait, blocks, 256, 0, nullptr, arrived.data(), saw.data(),
              ticks_for_ms(5000));
  gpm::check_cuda(cudaDeviceSynchronize(), "arrive_and_wait");
  for (int s : gpm::test::to_host(saw)) ASSERT_EQ(s, 1) << "a block ran after others had left";
  gpm::test::expect_error(gpm::errc::invalid_argument, "fits a multiprocessor",
                          [] { gpm::resident_blocks(arrive_and_wait, 256, std::size_t{1} << 30); });
}

__global__ void add_to_all(int* x, int n, int v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

TEST(ConformanceRuntime, RegisteredHostMemoryIsVisibleToKernels) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const int n = static_cast<int>(4 * page / sizeof(int));
  void* raw = nullptr;
  ASSERT_EQ(posix_memalign(&raw, page, 4 * page), 0);
  int* host = static_cast<int*>(raw);
  for (int i = 0; i < n; ++i) host[i] = i;
  ASSERT_EQ(cudaHostRegister(host, 4 * page, cudaHostRegisterMapped), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(host, 4 * page, cudaHostRegisterMapped),
            cudaErrorHostMemoryAlreadyRegistered);
  cudaGetLastError();
  int* dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&dev, host, 0), cudaSuccess);
  gpm::launch(add_to_all, (n + 255) / 256, 256, 0, nullptr, dev, n, 1000);
  gpm::test::sync_ok();
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], i + 1000);
  EXPECT_EQ(cudaHostUnregister(host), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(host), cudaErrorHostMemoryNotRegistered);
  cudaGetLastError();
  std::free(raw);
}

// pinned_buffer::for_io: page-locked (registering it again is refused), aligned for O_DIRECT (2 MiB
// from 2 MiB up, where huge pages can back it), copies both ways, moves, and refuses overflow.
TEST(ConformanceRuntime, PinnedBufferForIoIsRegisteredAlignedAndCopies) {
  for (const std::size_t count : {std::size_t{1}, std::size_t{5} << 18}) {  // 4 B, 5 MiB of int
    SCOPED_TRACE(count);
    auto b = gpm::pinned_buffer<int>::for_io(count);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), count);
    const std::uintptr_t align = count * sizeof(int) >= (2u << 20) ? (2u << 20) : 4096;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % align, 0u);
    EXPECT_EQ(cudaHostRegister(b.data(), sizeof(int), cudaHostRegisterDefault),
              cudaErrorHostMemoryAlreadyRegistered);
    cudaGetLastError();
    for (std::size_t i = 0; i < count; ++i) b.data()[i] = static_cast<int>(i * 7);
    gpm::device_buffer<int> d(count);
    gpm::check_cuda(cudaMemcpy(d.data(), b.data(), b.bytes(), cudaMemcpyHostToDevice), "to");
    gpm::pinned_buffer<int> moved = std::move(b);
    EXPECT_EQ(b.data(), nullptr);
    std::memset(moved.data(), 0, moved.bytes());
    gpm::check_cuda(cudaMemcpy(moved.data(), d.data(), moved.bytes(), cudaMemcpyDeviceToHost),
                    "from");
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(moved.data()[i], static_cast<int>(i * 7));
    moved = gpm::pinned_buffer<int>::for_io(1);  // releases the first buffer
    EXPECT_EQ(moved.size(), 1u);
  }
  gpm::test::expect_error(gpm::errc::invalid_argument, "overflow", [] {
    (void)gpm::pinned_buffer<int>::for_io(std::numeric_limits<std::size_t>::max() / 2);
  });
}

// Maps a fresh file in `dir` shared and writable, then tries to register it.
cudaError_t register_file_mapping(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / ("gpmkit-register-" + std::to_string(getpid()));
  const int fd = open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return cudaErrorUnknown;
  const std::size_t size = 1 << 20;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return cudaErrorUnknown;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  std::filesystem::remove(file);
  if (p == MAP_FAILED) return cudaErrorUnknown;
  const cudaError_t e = cudaHostRegister(p, size, cudaHostRegisterMapped);
  if (e == cudaSuccess) cudaHostUnregister(p);
  cudaGetLastError();
  munmap(p, size);
  return e;
}

bool is_tmpfs(const std::filesystem::path& dir) {
  struct statfs fs {};
  return statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == 0x01021994;
}

TEST(ConformanceRuntime, SharedFileMappingRegistersOnTmpfsOnly) {
  if (is_tmpfs("/dev/shm")) {
    EXPECT_EQ(register_file_mapping("/dev/shm"), cudaSuccess);
  }
  const std::filesystem::path disk = std::filesystem::current_path();
  if (is_tmpfs(disk)) GTEST_SKIP() << "the working directory is on tmpfs; no disk file to try";
  EXPECT_EQ(register_file_mapping(disk), cudaErrorInvalidValue)
      << "a writable shared mapping of a disk file must be refused (Linux long-term pin rule)";
}

}  // namespace
