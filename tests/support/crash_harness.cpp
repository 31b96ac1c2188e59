// The crash harness (see crash_harness.hpp).
#include "crash_harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <string_view>

#include <gtest/gtest.h>

#include <gpm/platform/hash.hpp>

extern char** environ;

namespace gpm::test {

namespace {

std::map<std::string, scenario_fn>& scenarios() {
  static std::map<std::string, scenario_fn> m;
  return m;
}

constexpr std::string_view kChild = "--gpm-crash-child=";
constexpr std::string_view kPool = "--gpm-pool=";
constexpr std::string_view kPmDir = "--gpm-pm-dir=";
constexpr std::string_view kSnapDir = "--gpm-snapshot-dir=";
constexpr std::string_view kSeed = "--gpm-seed=";
constexpr std::string_view kFd = "--gpm-progress-fd=";

std::optional<std::string> value_of(std::string_view arg, std::string_view key) {
  if (arg.substr(0, key.size()) != key) return std::nullopt;
  return std::string(arg.substr(key.size()));
}

}  // namespace

bool register_scenario(const char* name, scenario_fn fn) {
  scenarios()[name] = fn;
  return true;
}

std::optional<int> run_child_if_requested(int argc, char** argv) {
  std::optional<std::string> name;
  scenario_args args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (auto v = value_of(a, kChild)) name = *v;
    if (auto v = value_of(a, kPool)) args.pool_path = *v;
    if (auto v = value_of(a, kPmDir)) args.pm_dir = *v;
    if (auto v = value_of(a, kSnapDir)) args.snapshot_dir = *v;
    if (auto v = value_of(a, kSeed)) args.seed = std::strtoull(v->c_str(), nullptr, 10);
    if (auto v = value_of(a, kFd)) args.progress_fd = std::atoi(v->c_str());
  }
  if (!name) return std::nullopt;
  auto it = scenarios().find(*name);
  if (it == scenarios().end()) {
    std::fprintf(stderr, "crash child: no scenario named %s\n", name->c_str());
    return 2;
  }
  try {
    return it->second(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash child %s: %s\n", name->c_str(), e.what());
    return 3;
  }
}

void report_progress(const scenario_args& args, const std::string& line) {
  if (args.progress_fd < 0) return;
  const std::string l = line + "\n";
  std::size_t done = 0;
  while (done < l.size()) {
    const ssize_t n = ::write(args.progress_fd, l.data() + done, l.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

kill_policy kill_after_ms(double ms, std::string arm_on) {
  kill_policy p;
  p.after_ms = ms;
  p.arm_on = std::move(arm_on);
  return p;
}

kill_policy kill_at(const std::string& crash_point) {
  kill_policy p;
  p.crash_point = crash_point;
  return p;
}

std::string child_result::describe() const {
  std::string s = killed_by_parent ? "killed by the parent"
                  : killed         ? "killed itself at its crash point"
                  : timed_out      ? "timed out"
                                   : "exited with code " + std::to_string(exit_code);
  s += ", " + std::to_string(progress.size()) + " progress lines";
  if (!progress.empty()) s += " (last: " + progress.back() + ")";
  return s;
}

child_result run_child(const std::string& scenario, const scenario_args& args,
                       const kill_policy& policy) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  // The child writes to a descriptor that survives exec; the parent keeps the read end.
  const int child_fd = fcntl(fds[1], F_DUPFD, 100);

  std::vector<std::string> arg_storage = {
      "/proc/self/exe",
      std::string(kChild) + scenario,
      std::string(kPool) + args.pool_path,
      std::string(kPmDir) + args.pm_dir,
      std::string(kSnapDir) + args.snapshot_dir,
      std::string(kSeed) + std::to_string(args.seed),
      std::string(kFd) + std::to_string(child_fd),
  };
  std::vector<char*> argv;
  for (auto& s : arg_storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GPMKIT_CRASH_POINT=", 19) != 0) env_storage.emplace_back(*e);
  }
  if (!policy.crash_point.empty())
    env_storage.push_back("GPMKIT_CRASH_POINT=" + policy.crash_point);
  std::vector<char*> envp;
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
  ::close(child_fd);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
  }

  child_result result;
  std::string buffered;
  const auto start = std::chrono::steady_clock::now();
  auto since_ms = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  auto elapsed_ms = [&] { return since_ms(start); };
  // The kill timer runs from spawn, or from the line `arm_on` once the child has sent it.
  std::optional<std::chrono::steady_clock::time_point> armed;
  if (policy.arm_on.empty()) armed = start;
  int status = 0;
  bool reaped = false;
  bool pipe_open = true;
  while (!reaped || pipe_open) {
    if (pipe_open) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 1) > 0) {
        char buf[4096];
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n > 0) {
          buffered.append(buf, static_cast<std::size_t>(n));
          if (!armed && buffered.find(policy.arm_on + "\n") != std::string::npos) {
            armed = std::chrono::steady_clock::now();
          }
        } else {
          pipe_open = false;
        }
      }
    }
    if (!reaped) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
      } else if (policy.after_ms && armed && since_ms(*armed) >= *policy.after_ms) {
        kill(pid, SIGKILL);
        result.killed_by_parent = true;
        waitpid(pid, &status, 0);
        reaped = true;
      } else if (elapsed_ms() >= policy.timeout_ms) {
        kill(pid, SIGKILL);
        result.timed_out = true;
        waitpid(pid, &status, 0);
        reaped = true;
      } else if (!pipe_open) {
        usleep(200);
      }
    }
  }
  ::close(fds[0]);
  if (WIFSIGNALED(status)) {
    result.killed = WTERMSIG(status) == SIGKILL;
    if (!result.killed) result.exit_code = 128 + WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  std::size_t begin = 0;
  for (std::size_t i = 0; i < buffered.size(); ++i) {
    if (buffered[i] == '\n') {
      result.progress.push_back(buffered.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return result;
}

void report_run_ms(const scenario_args& args, std::chrono::steady_clock::time_point ready) {
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - ready;
  report_progress(args, "ran " + std::to_string(took.count()));
}

double measure_run_ms(const std::string& scenario, const scenario_args& args) {
  const child_result r = run_child(scenario, args, {});
  for (const std::string& line : r.progress) {
    if (line.rfind("ran ", 0) == 0) return std::max(1.0, std::stod(line.substr(4)));
  }
  ADD_FAILURE() << "the calibration run did not finish: " << r.describe();
  return 100.0;
}

kill_policy kill_during_run(std::mt19937_64& rng, double run_ms) {
  const double frac = static_cast<double>(rng() % 1000) / 1000.0;
  return kill_after_ms(0.1 + frac * run_ms, "ready");
}

int crash_trials(int fallback) {
  const char* v = std::getenv("GPMKIT_CRASH_TRIALS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

std::uint64_t trial_seed(int trial) {
  const char* v = std::getenv("GPMKIT_CRASH_SEED");
  const std::uint64_t base = v != nullptr ? std::strtoull(v, nullptr, 10) : 0x5eedull;
  return gpm::splitmix64(base + static_cast<std::uint64_t>(trial));
}

scratch_dirs::scratch_dirs(const std::string& tag) {
  static std::atomic<int> counter{0};
  const std::string unique =
      tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
  pm_dir_ = "/dev/shm/gpmkit-test-" + unique;
  const char* tmp = std::getenv("GPMKIT_TEST_DISK_DIR");
  snapshot_dir_ = std::string(tmp != nullptr ? tmp : "/var/tmp") + "/gpmkit-test-snap-" + unique;
  std::filesystem::create_directories(pm_dir_);
  std::filesystem::create_directories(snapshot_dir_);
}

scratch_dirs::~scratch_dirs() {
  std::error_code ec;
  std::filesystem::remove_all(pm_dir_, ec);
  std::filesystem::remove_all(snapshot_dir_, ec);
}

}  // namespace gpm::test
