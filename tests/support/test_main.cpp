// main() of every gpmkit test binary. A binary started by the crash harness as a child runs its
// scenario instead of the tests. In the cuda backend a binary run without a GPU prints why and
// exits 77, which CTest reports as "skipped" (never as passed).
#include <gtest/gtest.h>

#include <cstdio>

#include <gpm/platform/runtime.hpp>

#include "crash_harness.hpp"

int main(int argc, char** argv) {
  if (const auto code = gpm::test::run_child_if_requested(argc, argv)) return *code;
  ::testing::InitGoogleTest(&argc, argv);
#if GPM_BACKEND_CUDA
  const gpm::device_info dev = gpm::query_device();
  if (!dev.present) {
    std::fprintf(stderr, "SKIPPED: this is a CUDA build and no GPU is usable here (%s)\n",
                 dev.absent_reason.c_str());
    return 77;
  }
  std::printf("running on %s (compute %d.%d)\n", dev.name.c_str(), dev.compute_major,
              dev.compute_minor);
#endif
  return RUN_ALL_TESTS();
}
