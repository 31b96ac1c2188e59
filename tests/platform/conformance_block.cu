// Conformance, block level: shared memory (static and dynamic), __syncthreads and its reducing
// forms, index built-ins in 3-D, and a one-million-thread grid. Same expectations on both backends.
#include <gpm/platform/kernel.cuh>

#include <numeric>

#include "gpm_test.hpp"

namespace {

constexpr int kBlock = 256;

__global__ void block_sum(const int* in, int* out) {
  __shared__ int partial[kBlock];
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * kBlock + t];
  __syncthreads();
  for (unsigned stride = kBlock / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

TEST(ConformanceBlock, SharedMemoryReduction) {
  const int blocks = 64;
  auto in = gpm::test::random_values<int>(blocks * kBlock, 1, -1000, 1000);
  auto d_in = gpm::test::to_device(in);
  gpm::device_buffer<int> d_out(blocks);
  gpm::launch(block_sum, blocks, kBlock, 0, nullptr, d_in.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (int b = 0; b < blocks; ++b) {
    EXPECT_EQ(out[b], std::accumulate(in.begin() + b * kBlock, in.begin() + (b + 1) * kBlock, 0))
        << "block " << b;
  }
}

// Hillis-Steele inclusive scan with two shared buffers.
__global__ void block_scan(const int* in, int* out) {
  __shared__ int buf[2][kBlock];
  const unsigned t = threadIdx.x;
  int cur = 0;
  buf[cur][t] = in[blockIdx.x * kBlock + t];
  __syncthreads();
  for (unsigned offset = 1; offset < kBlock; offset *= 2) {
    buf[1 - cur][t] = buf[cur][t] + (t >= offset ? buf[cur][t - offset] : 0);
    cur = 1 - cur;
    __syncthreads();
  }
  out[blockIdx.x * kBlock + t] = buf[cur][t];
}

TEST(ConformanceBlock, SharedMemoryScan) {
  const int blocks = 16;
  auto in = gpm::test::random_values<int>(blocks * kBlock, 2, -50, 50);
  auto d_in = gpm::test::to_device(in);
  gpm::device_buffer<int> d_out(in.size());
  gpm::launch(block_scan, blocks, kBlock, 0, nullptr, d_in.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (int b = 0; b < blocks; ++b) {
    int running = 0;
    for (int i = 0; i < kBlock; ++i) {
      running += in[b * kBlock + i];
      ASSERT_EQ(out[b * kBlock + i], running) << "block " << b << " element " << i;
    }
  }
}

__global__ void reverse_in_shared(const int* in, int* out, int n) {
  int* s = gpm::dynamic_shared_memory<int>();
  const int base = blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[base + i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[base + i] = s[n - 1 - i];
}

TEST(ConformanceBlock, DynamicSharedMemory) {
  const int n = 3000, blocks = 8;
  auto in = gpm::test::random_values<int>(n * blocks, 3, 0, 1 << 20);
  auto d_in = gpm::test::to_device(in);
  gpm::device_buffer<int> d_out(in.size());
  gpm::launch(reverse_in_shared, blocks, 192, n * sizeof(int), nullptr, d_in.data(), d_out.data(),
              n);
  auto out = gpm::test::to_host(d_out);
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[b * n + i], in[b * n + n - 1 - i]);
  }
}

TEST(ConformanceBlock, LargeDynamicSharedMemoryNeedsOptIn) {
  const int n = 20000;  // 80 000 bytes: above the 48 KiB default, below the opt-in limit
  auto in = gpm::test::random_values<int>(n, 4, 0, 1 << 20);
  auto d_in = gpm::test::to_device(in);
  gpm::device_buffer<int> d_out(n);
  EXPECT_THROW(gpm::launch(reverse_in_shared, 1, 256, n * sizeof(int), nullptr, d_in.data(),
                           d_out.data(), n),
               gpm::error);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  gpm::check_cuda(
      cudaFuncSetAttribute(reverse_in_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           n * static_cast<int>(sizeof(int))),
      "cudaFuncSetAttribute");
  gpm::launch(reverse_in_shared, 1, 256, n * sizeof(int), nullptr, d_in.data(), d_out.data(), n);
  auto out = gpm::test::to_host(d_out);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], in[n - 1 - i]);
}

__global__ void barrier_reductions(const int* pred, int* out) {
  const int p = pred[blockIdx.x * blockDim.x + threadIdx.x];
  const int count = __syncthreads_count(p);
  const int all = __syncthreads_and(p);
  const int any = __syncthreads_or(p);
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = count;
    out[blockIdx.x * 3 + 1] = all != 0;
    out[blockIdx.x * 3 + 2] = any != 0;
  }
}

TEST(ConformanceBlock, SyncthreadsCountAndOr) {
  const int blocks = 4, threads = 200;
  std::vector<int> pred(blocks * threads, 0);
  for (int i = 0; i < threads; ++i) pred[0 * threads + i] = (i % 3 == 0) ? 7 : 0;  // some
  for (int i = 0; i < threads; ++i) pred[1 * threads + i] = 1;                     // all
  // block 2: none
  pred[3 * threads + threads - 1] = -1;  // exactly one, the last thread
  auto d_pred = gpm::test::to_device(pred);
  gpm::device_buffer<int> d_out(blocks * 3);
  gpm::launch(barrier_reductions, blocks, threads, 0, nullptr, d_pred.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  EXPECT_EQ(out[0], (threads + 2) / 3);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 1);
  EXPECT_EQ(out[3], threads);
  EXPECT_EQ(out[4], 1);
  EXPECT_EQ(out[5], 1);
  EXPECT_EQ(out[6], 0);
  EXPECT_EQ(out[7], 0);
  EXPECT_EQ(out[8], 0);
  EXPECT_EQ(out[9], 1);
  EXPECT_EQ(out[10], 0);
  EXPECT_EQ(out[11], 1);
}

__global__ void record_indices(uint4* out) {
  const unsigned block_linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread_linear =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  out[block_linear * threads + thread_linear] = make_uint4(
      threadIdx.x | threadIdx.y << 10 | threadIdx.z << 20,
      blockIdx.x | blockIdx.y << 10 | blockIdx.z << 20, thread_linear / warpSize, gpm::lane_id());
}

TEST(ConformanceBlock, ThreeDimensionalIndices) {
  const dim3 grid(3, 2, 2), block(8, 4, 3);
  const unsigned threads = block.x * block.y * block.z;
  const unsigned blocks = grid.x * grid.y * grid.z;
  gpm::device_buffer<uint4> d_out(threads * blocks);
  gpm::launch(record_indices, grid, block, 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              const unsigned b = bx + grid.x * (by + grid.y * bz);
              const unsigned t = tx + block.x * (ty + block.y * tz);
              const uint4 v = out[b * threads + t];
              ASSERT_EQ(v.x, tx | ty << 10 | tz << 20);
              ASSERT_EQ(v.y, bx | by << 10 | bz << 20);
              ASSERT_EQ(v.z, t / 32);
              ASSERT_EQ(v.w, t % 32);
            }
}

__global__ void affine(unsigned* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 3u + 1u;
}

TEST(ConformanceBlock, MillionThreadGrid) {
  const unsigned n = 1u << 20;
  gpm::device_buffer<unsigned> d_out(n);
  d_out.fill_bytes(0xff);
  gpm::launch(affine, (n + 255) / 256, 256, 0, nullptr, d_out.data(), n);
  auto out = gpm::test::to_host(d_out);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], i * 3u + 1u) << i;
}

// Threads past the end leave early; the rest still meet at the barrier (exited threads do not
// hold a barrier up).
__global__ void early_exit_then_barrier(int* out, int n) {
  __shared__ int s[kBlock];
  const int t = threadIdx.x;
  if (t >= n) return;
  s[t] = t + 1;
  __syncthreads();
  out[t] = s[n - 1 - t];
}

TEST(ConformanceBlock, ExitedThreadsDoNotHoldBarrier) {
  const int n = 100;
  gpm::device_buffer<int> d_out(n);
  gpm::launch(early_exit_then_barrier, 1, kBlock, 0, nullptr, d_out.data(), n);
  auto out = gpm::test::to_host(d_out);
  for (int t = 0; t < n; ++t) EXPECT_EQ(out[t], n - t);
}

}  // namespace
