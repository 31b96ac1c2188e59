// A tour of gpmkit's platform layer: one kernel source that runs on the GPU (cuda backend) or on
// the host SIMT emulator (host backend). It sums 16M values with a warp-shuffle + shared-memory
// block reduction, checks the result against the CPU, and prints what ran where.
#include <gpm/platform/kernel.cuh>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

namespace {

constexpr int kThreads = 256;

__global__ void sum_kernel(const unsigned* in, std::size_t n, unsigned long long* total) {
  __shared__ unsigned long long warp_sums[kThreads / 32];
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  unsigned long long v = 0;
  for (std::uint64_t i : gpm::grid_stride(n)) {
    v += in[i];
  }
  for (unsigned offset = 16; offset > 0; offset /= 2) v += warp.shfl_down(v, offset);
  if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = v;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    v = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0;
    for (unsigned offset = 16; offset > 0; offset /= 2) v += warp.shfl_down(v, offset);
    if (warp.thread_rank() == 0) atomicAdd(total, v);
  }
}

}  // namespace

int main() {
  try {
    const gpm::device_info dev = gpm::query_device();
    if (!dev.present) {
      std::printf("no usable GPU (%s)\n", dev.absent_reason.c_str());
      return 1;
    }
    std::printf("gpmkit %s, %s backend on %s\n", GPM_VERSION_STRING, GPM_BACKEND_NAME,
                dev.name.c_str());
    const std::size_t n = std::size_t{1} << 24;
    std::vector<unsigned> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned>((i * 2654435761u) >> 20);
    gpm::device_buffer<unsigned> in(n);
    in.copy_from_host(host.data(), n);
    gpm::device_buffer<unsigned long long> total(1);
    total.fill_bytes(0);

    const auto t0 = std::chrono::steady_clock::now();
    gpm::launch(sum_kernel, 4 * std::max(dev.multiprocessors, 1), kThreads, 0, nullptr, in.data(),
                n, total.data());
    unsigned long long got = 0;
    total.copy_to_host(&got, 1);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const unsigned long long want = std::accumulate(host.begin(), host.end(), 0ull);
    std::printf("sum of %zu values: %llu (%s), %.2f ms\n", n, got,
                got == want ? "correct" : "WRONG", ms);
    return got == want ? 0 : 1;
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "platform_tour: %s\n", e.what());
    return 1;
  }
}
