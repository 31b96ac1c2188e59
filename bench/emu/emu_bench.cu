// Speed of the host SIMT emulator (host backend only), with Google Benchmark: the cost of a
// 256-thread __syncthreads, of a warp ballot and shuffle, and of launching a trivial grid of one
// million threads. These bound how fast module test suites can run without a GPU.
#include <benchmark/benchmark.h>

#include <gpm/platform/kernel.cuh>

namespace {

__global__ void barrier_loop(int iterations, int* sink) {
  int v = 0;
  for (int i = 0; i < iterations; ++i) {
    v += static_cast<int>(threadIdx.x);
    __syncthreads();
  }
  if (v == -1) *sink = v;
}

__global__ void ballot_loop(int iterations, unsigned* sink) {
  unsigned acc = 0;
  for (int i = 0; i < iterations; ++i) acc ^= __ballot_sync(0xffffffffu, (threadIdx.x + i) & 1);
  if (acc == 1u) *sink = acc;
}

__global__ void shuffle_reduce_loop(int iterations, unsigned* sink) {
  unsigned acc = 0;
  for (int i = 0; i < iterations; ++i) {
    unsigned v = threadIdx.x + static_cast<unsigned>(i);
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    acc ^= v;
  }
  if (acc == 1u) *sink = acc;
}

__global__ void trivial(unsigned* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x; }

void BM_Syncthreads256(benchmark::State& state) {
  const int iterations = 1000;
  gpm::device_buffer<int> sink(1);
  for (auto _ : state) {
    gpm::launch(barrier_loop, 1, 256, 0, nullptr, iterations, sink.data());
    gpm::check_cuda(cudaDeviceSynchronize(), "sync");
  }
  state.SetItemsProcessed(state.iterations() * iterations);  // items = block-wide barriers
  state.SetLabel("items: one __syncthreads of a 256-thread block");
}
BENCHMARK(BM_Syncthreads256)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WarpBallot(benchmark::State& state) {
  const int iterations = 10000;
  gpm::device_buffer<unsigned> sink(1);
  for (auto _ : state) {
    gpm::launch(ballot_loop, 1, 32, 0, nullptr, iterations, sink.data());
    gpm::check_cuda(cudaDeviceSynchronize(), "sync");
  }
  state.SetItemsProcessed(state.iterations() * iterations);
  state.SetLabel("items: one warp-wide __ballot_sync");
}
BENCHMARK(BM_WarpBallot)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WarpShuffleReduce(benchmark::State& state) {
  const int iterations = 2000;
  gpm::device_buffer<unsigned> sink(1);
  for (auto _ : state) {
    gpm::launch(shuffle_reduce_loop, 1, 32, 0, nullptr, iterations, sink.data());
    gpm::check_cuda(cudaDeviceSynchronize(), "sync");
  }
  state.SetItemsProcessed(state.iterations() * iterations * 5);
  state.SetLabel("items: one warp-wide __shfl_down_sync");
}
BENCHMARK(BM_WarpShuffleReduce)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TrivialGrid1M(benchmark::State& state) {
  const unsigned threads = 1u << 20;
  gpm::device_buffer<unsigned> out(threads);
  for (auto _ : state) {
    gpm::launch(trivial, threads / 256, 256, 0, nullptr, out.data());
    gpm::check_cuda(cudaDeviceSynchronize(), "sync");
  }
  state.SetItemsProcessed(state.iterations() * threads);
  state.SetLabel("items: GPU threads; one launch of 4096 x 256");
}
BENCHMARK(BM_TrivialGrid1M)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
