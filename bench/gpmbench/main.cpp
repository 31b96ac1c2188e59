// gpmbench: gpmkit's benchmark driver. `run` measures a workload's modes side by side and appends
// one JSON record per mode to <DIR>/<workload>.jsonl; `list` names the workloads and modes;
// `report` hands a results directory to bench/report/report.py for tables and plots.
// docs/bench.md describes the commands, the record schema and the methodology.
//
// Exit status: 0 done, 1 a failure (including a failed check of a mode's data), 2 a wrong
// command line, 77 a CUDA build run without a GPU (CTest reports the test as skipped).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/platform/runtime.hpp>

#include "machine.hpp"
#include "workload.hpp"

namespace {

using gpmbench::usage_error;

constexpr const char* kUsage =
    "usage:\n"
    "  gpmbench list\n"
    "  gpmbench run <workload> [--out DIR] [--repeats N] [--warmup N] [--bytes B] [--quick]\n"
    "                          [--modes a,b,...] [--disk-dir DIR] [--pm-dir DIR]\n"
    "  gpmbench report <DIR> [--out FILE]\n"
    "\n"
    "run options:\n"
    "  --out DIR       where <workload>.jsonl is appended (default bench/results/<machine-tag>)\n"
    "  --repeats N     timed repeats per mode (default 5; --quick: 1)\n"
    "  --warmup N      untimed runs before them (default 1; --quick: 0)\n"
    "  --bytes B       the workload's main size, a multiple of 4096; suffixes K, M, G (KiB, MiB,\n"
    "                  GiB) allowed (platform: 1G on a GPU, 64M on the host emulator)\n"
    "  --quick         tiny sizes, for smoke tests: the numbers mean nothing\n"
    "  --threads-per-block N, --blocks-per-sm N\n"
    "                  geometry of the kernels that fill the GPU (default 256, as many as fit)\n"
    "  --modes a,b     only these modes (and the ceilings they are compared against)\n"
    "  --disk-dir DIR  where files on disk go (default /var/tmp)\n"
    "  --pm-dir DIR    where pools go (default $GPMKIT_PM_DIR, else /dev/shm)\n";

// "64M" -> 67108864. Binary suffixes: the sizes are of memory and pools.
std::uint64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    throw usage_error("--bytes " + text + ": not a number of bytes");
  }
  std::string_view suffix = std::string_view(text).substr(used);
  if (suffix.size() >= 3 && suffix.substr(suffix.size() - 2) == "iB") {
    suffix.remove_suffix(2);
  }
  int shift = 0;
  if (suffix == "K" || suffix == "k") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g") {
    shift = 30;
  } else if (!suffix.empty()) {
    throw usage_error("--bytes " + text + ": unknown suffix (use K, M or G)");
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(n) << shift;
  if (bytes == 0 || bytes % 4096 != 0 || (bytes >> shift) != n) {
    throw usage_error("--bytes " + text +
                      ": must be a positive multiple of 4096 (pools are made "
                      "of 4 KiB pages)");
  }
  return bytes;
}

int parse_count(const std::string& flag, const std::string& text, int minimum) {
  std::size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < minimum) {
    throw usage_error(flag + " " + text + ": must be a whole number of at least " +
                      std::to_string(minimum));
  }
  return n;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

int list_workloads() {
  for (const gpmbench::workload& w : gpmbench::workloads()) {
    std::printf("%s: %s\n", w.name.c_str(), w.summary.c_str());
    for (const gpmbench::mode& m : w.modes) {
      std::printf("  %-26s %s", m.name.c_str(), m.summary.c_str());
      if (!m.ceiling.empty()) std::printf(" [ratio to %s]", m.ceiling.c_str());
      std::printf("\n");
    }
  }
  return 0;
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) throw usage_error("run: name a workload (gpmbench list shows them)");
  const gpmbench::workload& w = gpmbench::find_workload(args[0]);
  gpmbench::run_options o;
  bool repeats_given = false;
  bool warmup_given = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto next = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--out") {
      o.out_dir = next();
    } else if (a == "--repeats") {
      o.repeats = parse_count(a, next(), 1);
      repeats_given = true;
    } else if (a == "--warmup") {
      o.warmup = parse_count(a, next(), 0);
      warmup_given = true;
    } else if (a == "--bytes") {
      o.bytes = parse_bytes(next());
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--modes") {
      o.modes = split_commas(next());
    } else if (a == "--disk-dir") {
      o.disk_dir = next();
    } else if (a == "--pm-dir") {
      o.pm_dir = next();
    } else if (a == "--threads-per-block") {
      o.threads_per_block = static_cast<unsigned>(parse_count(a, next(), 32));
      if (o.threads_per_block > 1024 || o.threads_per_block % 32 != 0) {
        throw usage_error("--threads-per-block must be a multiple of 32 up to 1024");
      }
    } else if (a == "--blocks-per-sm") {
      o.blocks_per_sm = static_cast<unsigned>(parse_count(a, next(), 1));
    } else {
      throw usage_error("run: unknown option " + a);
    }
  }
  if (o.quick && !repeats_given) o.repeats = 1;
  if (o.quick && !warmup_given) o.warmup = 0;

  const gpm::device_info dev = gpm::query_device();
  if (!dev.present) {
    std::fprintf(stderr, "SKIPPED: this is a CUDA build and no GPU is usable here (%s)\n",
                 dev.absent_reason.c_str());
    return 77;
  }
  if (o.out_dir.empty()) o.out_dir = "bench/results/" + gpmbench::machine_tag(dev);
  gpmbench::run_workload(w, o, dev);
  return 0;
}

// Replaces this process with python3 running report.py (its path is fixed at build time).
int report(const std::vector<std::string>& args) {
  if (args.empty()) throw usage_error("report: name a results directory");
  std::vector<std::string> words = {"python3", GPMBENCH_REPORT_SCRIPT};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp("python3", argv.data());
  std::perror("gpmbench report: cannot run python3");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::fputs(kUsage, args.empty() ? stderr : stdout);
      return args.empty() ? 2 : 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "list") return list_workloads();
    if (args[0] == "run") return run(rest);
    if (args[0] == "report") return report(rest);
    throw usage_error("unknown command " + args[0]);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "gpmbench: %s\n(gpmbench --help shows the usage)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpmbench: error: %s\n", e.what());
    return 1;
  }
}
