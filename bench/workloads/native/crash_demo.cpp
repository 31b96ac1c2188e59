// `gpmbench crash-demo`: a crash and a resume that a user can watch (make demo). A BFS whose
// kernels persist their results into a pool (this folder's bfs) runs in a child process that is
// killed with SIGKILL halfway; the parent then resumes the run from the pool and checks that the
// result equals an uninterrupted run's, and that only the levels that were not durable were
// computed again. Declared with the workloads in gpmbench/workload.hpp, so that the runner
// includes no workload.
#include "gpmbench/workload.hpp"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/native/native.hpp"

namespace gpmbench {

namespace {

namespace native = gpmbench::native;

native::bfs_config demo_problem(bool emulated) {
  native::bfs_config c;
  c.width = c.height = emulated ? 160 : 2048;
  c.extra_roads = c.width * 4;
  return c;
}

gpm::pool_options demo_options(const std::string& dir) {
  gpm::pool_options o;
  o.pm_dir = dir;
  o.snapshot_dir = dir + "/snapshots";
  o.notice = [](const std::string&) {};
  return o;
}

std::string pm_parent() {
  const char* env = std::getenv("GPMKIT_PM_DIR");
  return env != nullptr && *env != '\0' ? env : "/dev/shm";
}

}  // namespace

int crash_demo_child(const std::string& dir, bool emulated, std::uint64_t kill_at) {
  native::run_bfs(dir + "/run.pool", demo_options(dir), demo_problem(emulated), false,
                  [&](std::uint64_t steps, const std::string& line) {
                    if (steps % 64 == 0) std::printf("    child: %s\n", line.c_str());
                    if (steps >= kill_at) {
                      std::printf("    child: %s; SIGKILL now\n", line.c_str());
                      std::fflush(stdout);
                      ::kill(::getpid(), SIGKILL);
                    }
                    std::fflush(stdout);
                  });
  std::printf("    child: finished before it was killed\n");
  return 0;
}

int crash_demo(const gpm::device_info& dev) {
  std::string dir = pm_parent() + "/gpmkit-demo.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) throw std::runtime_error("cannot create a directory in " + pm_parent());
  struct cleanup {
    std::string dir;
    ~cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_dir{dir};
  const native::bfs_config problem = demo_problem(dev.emulated);
  std::printf("crash-and-resume demo: BFS over a %llu x %llu road grid on %s; pools in %s\n",
              static_cast<unsigned long long>(problem.width),
              static_cast<unsigned long long>(problem.height), dev.name.c_str(), dir.c_str());

  std::filesystem::create_directories(dir + "/reference");
  const native::run_summary ref = native::run_bfs(
      dir + "/reference/run.pool", demo_options(dir + "/reference"), problem, false);
  std::printf("  1. an uninterrupted run: %llu levels in %.3f s\n",
              static_cast<unsigned long long>(ref.steps_total), ref.seconds);

  const std::uint64_t kill_at = ref.steps_total / 2;
  std::printf("  2. the same run in a child process, which is killed with SIGKILL once level %llu "
              "is durable:\n",
              static_cast<unsigned long long>(kill_at));
  std::fflush(stdout);
  const std::string kill_text = std::to_string(kill_at);
  std::vector<std::string> words = {"gpmbench", "crash-demo", "--child", dir, kill_text};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
    throw std::runtime_error("cannot start the child process");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    std::printf("     the child died by SIGKILL, its kernels' work in flight lost\n");
  } else {
    std::printf("     the child was not killed (exit status %d): nothing to resume\n", status);
    return 1;
  }

  const native::run_summary resumed =
      native::run_bfs(dir + "/run.pool", demo_options(dir), problem, true);
  std::printf("  3. resumed from the pool: %llu levels were durable, %llu computed again in %.3f s "
              "(a restart would compute %llu)\n",
              static_cast<unsigned long long>(resumed.steps_at_start),
              static_cast<unsigned long long>(resumed.steps_run), resumed.seconds,
              static_cast<unsigned long long>(ref.steps_total));
  const bool same = resumed.output_checksum == ref.output_checksum &&
                    resumed.steps_total == ref.steps_total &&
                    resumed.steps_at_start + resumed.steps_run == ref.steps_total &&
                    resumed.steps_at_start >= kill_at;
  std::printf("  4. %s: the resumed run's costs %s the uninterrupted run's (checksum %016llx)\n",
              same ? "PASS" : "FAIL", same ? "equal" : "DIFFER from",
              static_cast<unsigned long long>(resumed.output_checksum));
  return same ? 0 : 1;
}

}  // namespace gpmbench
