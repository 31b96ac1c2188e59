// A user's program against the installed gpmkit package: a pool, a kernel that stores into it and
// persists, the compat C API, and a read back after reopening. Prints "consumer ok" on success.
#include <gpm/compat/libgpm.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include <cstdio>
#include <string>

__global__ void fill(gpm::pool_ref p, std::uint64_t offset, std::uint32_t n) {
  auto* x = p.ptr<std::uint32_t>(offset);
  for (std::uint64_t i : gpm::grid_stride(n)) x[i] = static_cast<std::uint32_t>(i * 3 + 1);
  gpm::persist();
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer <pool directory in tmpfs>\n");
    return 2;
  }
  gpm::pool_options o;
  o.pm_dir = argv[1];
  o.snapshot_dir = std::string(argv[1]) + "/snapshots";
  constexpr std::uint32_t n = 4096;
  {
    gpm::pool p = gpm::pool::create("consumer", 1 << 20, "consumer", o);
    const std::uint64_t off = p.allocate("x", n * 4);
    gpm::launch(fill, 4, 128, 0, nullptr, p.ref(), off, n);
    gpm::check_cuda(cudaDeviceSynchronize(), "fill");
  }
  gpm::pool p = gpm::pool::open("consumer", "consumer", o);
  const auto* x = p.host_ptr<std::uint32_t>(p.get("x").offset);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (x[i] != i * 3 + 1) {
      std::fprintf(stderr, "element %u is %u\n", i, x[i]);
      return 1;
    }
  }
  std::printf("consumer ok (%s)\n", gpm::query_device().name.c_str());
  return 0;
}
