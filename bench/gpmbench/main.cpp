// gpmbench: gpmkit's benchmark driver. `run` measures a workload's modes side by side and appends
// one JSON record per mode to <DIR>/<workload>.jsonl; `suite` runs every workload in every mode and
// reports; `list` names the workloads and modes; `report` hands a results directory to
// bench/report/report.py for tables and plots.
// docs/bench.md describes the commands, the record schema and the methodology.
//
// Exit status: 0 done, 1 a failure (including a failed check of a mode's data), 2 a wrong
// command line, 77 a CUDA build run without a GPU (CTest reports the test as skipped).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
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
    "                          [--modes a,b,...] [--cases a,b,...] [--interleave]\n"
    "                          [--budget S] [--disk-dir DIR] [--pm-dir DIR]\n"
    "  gpmbench suite (--quick | --full) [--out DIR] [--only a,b,...] [--repeats N] [--warmup N]\n"
    "                          [--budget S] [--resume]\n"
    "                          [--disk-dir DIR] [--pm-dir DIR] [--no-report]\n"
    "  gpmbench report <DIR> [--out FILE]\n"
    "  gpmbench crash-demo        a run killed with SIGKILL halfway, then resumed and checked\n"
    "  gpmbench machine           this machine as records describe it (one JSON object)\n"
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
    "  --cases a,b     only these of the workload's cases (the ooc workloads' regimes: in-gpu,\n"
    "                  in-host, out-of-core)\n"
    "  --interleave    the modes take turns: N rounds of one repeat of each mode, warm-ups in the\n"
    "                  first, so that no mode always runs before another; one record per mode\n"
    "  --budget S      start no mode after S seconds; exit status 3 when some did not run (with\n"
    "                  --interleave, the rounds done are recorded)\n"
    "  --disk-dir DIR  where files on disk go (default /var/tmp)\n"
    "  --pm-dir DIR    where pools go (default $GPMKIT_PM_DIR, else /dev/shm)\n"
    "\n"
    "suite: every workload in every mode, then the report (docs/benchmarks.md)\n"
    "  --quick         small sizes, 1 repeat: minutes, runs anywhere (also on the host emulator)\n"
    "  --full          each workload's full sizes (paper scale on a GPU), 3 repeats + 1 warm-up\n"
    "  --out DIR       default bench/results/<machine-tag>/suite-quick or suite-full\n"
    "  --only a,b      only these workloads\n"
    "  --no-report     do not run the report step\n"
    "  --budget S      start no mode after S seconds; exit status 3 when some did not run\n"
    "  --resume        skip the modes a suite run into DIR did already (DIR/suite-progress.txt),\n"
    "                  so several runs of one command, each within a budget, make one results\n"
    "                  directory\n";

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

// Options that `run` and `suite` share; returns false for an argument it does not know.
bool parse_common_option(const std::vector<std::string>& args, std::size_t& i,
                         gpmbench::run_options& o, bool& repeats_given, bool& warmup_given) {
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
  } else if (a == "--disk-dir") {
    o.disk_dir = next();
  } else if (a == "--pm-dir") {
    o.pm_dir = next();
  } else {
    return false;
  }
  return true;
}

// The GPU to measure on, or nullopt (with the reason on stderr) in a CUDA build without one.
std::optional<gpm::device_info> usable_device() {
  gpm::device_info dev = gpm::query_device();
  if (!dev.present) {
    std::fprintf(stderr, "SKIPPED: this is a CUDA build and no GPU is usable here (%s)\n",
                 dev.absent_reason.c_str());
    return std::nullopt;
  }
  return dev;
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) throw usage_error("run: name a workload (gpmbench list shows them)");
  const gpmbench::workload& w = gpmbench::find_workload(args[0]);
  gpmbench::run_options o;
  bool repeats_given = false;
  bool warmup_given = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (parse_common_option(args, i, o, repeats_given, warmup_given)) continue;
    const std::string& a = args[i];
    const auto next = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--bytes") {
      o.bytes = parse_bytes(next());
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--modes") {
      o.modes = split_commas(next());
    } else if (a == "--cases") {
      o.cases = split_commas(next());
    } else if (a == "--interleave") {
      o.interleave = true;
    } else if (a == "--budget") {
      o.deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(parse_count(a, next(), 0));
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

  const std::optional<gpm::device_info> dev = usable_device();
  if (!dev) return 77;
  if (o.out_dir.empty()) o.out_dir = "bench/results/" + gpmbench::machine_tag(*dev);
  return gpmbench::run_workload(w, o, *dev) ? 0 : 3;
}

// Runs python3 report.py (its path is fixed at build time) with `args`; returns its exit status.
int run_report(const std::vector<std::string>& args) {
  std::vector<std::string> words = {"python3", GPMBENCH_REPORT_SCRIPT};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t pid = 0;
  if (const int err = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ)) {
    std::fprintf(stderr, "gpmbench report: cannot run python3: %s\n", std::strerror(err));
    return 1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int report(const std::vector<std::string>& args) {
  if (args.empty()) throw usage_error("report: name a results directory");
  return run_report(args);
}

// The (workload, case, mode) triples a suite run into a results directory has done (recorded, or
// skipped as unable to run), a line "workload<TAB>case<TAB>mode" each, appended as they are done:
// what a run with --resume skips. A run without --resume starts the file afresh.
class suite_progress {
 public:
  suite_progress(const std::filesystem::path& path, bool resume) {
    std::filesystem::create_directories(path.parent_path());
    if (resume) {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) {
        if (!line.empty()) done_.insert(line);
      }
    }
    out_.open(path, resume ? std::ios::app : std::ios::trunc);
    if (!out_) throw std::runtime_error("gpmbench suite: cannot write " + path.string());
  }
  bool done(const std::string& w, const std::string& c, const std::string& m) const {
    return done_.count(key(w, c, m)) != 0;
  }
  void add(const std::string& w, const std::string& c, const std::string& m) {
    if (done_.insert(key(w, c, m)).second) out_ << key(w, c, m) << '\n' << std::flush;
  }

 private:
  static std::string key(const std::string& w, const std::string& c, const std::string& m) {
    return w + '\t' + c + '\t' + m;
  }
  std::set<std::string> done_;
  std::ofstream out_;
};

// The GPU of a record in `dir` measured on another GPU than `gpu` ("" if none): the records of one
// suite directory come from one GPU model (its figures compare workloads, and its report names one
// machine), so a run resumed on another machine must not add to them.
std::string other_gpu(const std::filesystem::path& dir, const std::string& gpu) {
  static const std::string key = "\"gpu\"";
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.path().extension() != ".jsonl") continue;
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);) {
      // "gpu", a colon and the name in quotes, with any blanks between (as other JSON writers
      // than gpmbench's put them).
      const std::size_t at = line.find(key);
      if (at == std::string::npos) continue;
      const std::size_t open = line.find_first_not_of(" \t:", at + key.size());
      if (open == std::string::npos || line[open] != '"') continue;
      const std::size_t close = line.find('"', open + 1);
      if (close == std::string::npos) continue;
      const std::string name = line.substr(open + 1, close - open - 1);
      if (name != gpu) return name;
    }
  }
  return "";
}

// Every workload (or those named with --only) in every mode, with progress, then the report. A
// workload that fails is reported and the suite goes on; the exit status says whether any failed.
int suite(const std::vector<std::string>& args) {
  gpmbench::run_options o;
  bool repeats_given = false;
  bool warmup_given = false;
  bool quick = false, full = false, with_report = true, resume = false;
  std::optional<double> budget_s;
  std::vector<std::string> only;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (parse_common_option(args, i, o, repeats_given, warmup_given)) continue;
    const std::string& a = args[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--full") {
      full = true;
    } else if (a == "--no-report") {
      with_report = false;
    } else if (a == "--resume") {
      resume = true;
    } else if (a == "--budget" && i + 1 < args.size()) {
      budget_s = static_cast<double>(parse_count(a, args[++i], 0));
    } else if (a == "--only" && i + 1 < args.size()) {
      only = split_commas(args[++i]);
    } else {
      throw usage_error("suite: unknown option " + a);
    }
  }
  if (quick == full) throw usage_error("suite: give exactly one of --quick and --full");
  o.quick = quick;
  if (!repeats_given) o.repeats = quick ? 1 : 3;
  if (!warmup_given) o.warmup = quick ? 0 : 1;
  std::vector<const gpmbench::workload*> chosen;
  for (const std::string& name : only) chosen.push_back(&gpmbench::find_workload(name));
  if (only.empty()) {
    for (const gpmbench::workload& w : gpmbench::workloads()) chosen.push_back(&w);
  }

  const std::optional<gpm::device_info> dev = usable_device();
  if (!dev) return 77;
  if (o.out_dir.empty()) {
    o.out_dir =
        "bench/results/" + gpmbench::machine_tag(*dev) + (quick ? "/suite-quick" : "/suite-full");
  }
  if (resume) {
    const std::string other = other_gpu(o.out_dir, dev->name);
    if (!other.empty()) {
      throw std::runtime_error("suite --resume: " + o.out_dir + " holds records measured on " +
                               other + ", and this machine's GPU is " + dev->name +
                               "; a suite's records come from one GPU model: give another --out "
                               "(nothing was measured or written)");
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (budget_s)
    o.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(*budget_s));
  suite_progress progress(std::filesystem::path(o.out_dir) / "suite-progress.txt", resume);
  std::string workload_name;
  o.done_already = [&](const std::string& c, const std::string& m) {
    return progress.done(workload_name, c, m);
  };
  o.on_done = [&](const std::string& c, const std::string& m) {
    progress.add(workload_name, c, m);
  };
  std::vector<std::string> failed;
  bool stopped = false;
  for (std::size_t k = 0; k < chosen.size() && !stopped; ++k) {
    const gpmbench::workload& w = *chosen[k];
    std::printf("\n[%zu/%zu, %.0f s] %s: %s\n", k + 1, chosen.size(), elapsed(), w.name.c_str(),
                w.summary.c_str());
    std::fflush(stdout);
    workload_name = w.name;
    try {
      stopped = !gpmbench::run_workload(w, o, *dev);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpmbench suite: %s failed: %s\n", w.name.c_str(), e.what());
      failed.push_back(w.name);
    }
  }
  std::printf("\nsuite: %zu workloads in %.0f s, results in %s\n", chosen.size(), elapsed(),
              o.out_dir.c_str());
  int status = 0;
  if (with_report) status = run_report({o.out_dir});
  if (stopped) {
    std::printf(
        "suite: the budget of %.0f s is spent before every mode ran; the same command with "
        "--resume goes on where this one stopped\n",
        *budget_s);
  }
  if (!failed.empty()) {
    std::string names;
    for (const std::string& n : failed) names += " " + n;
    std::fprintf(stderr, "gpmbench suite: failed:%s\n", names.c_str());
    return 1;
  }
  return stopped && status == 0 ? 3 : status;
}

}  // namespace

int main(int argc, char** argv) {
  // Every kernel's code is loaded when CUDA starts, unless the caller asked otherwise. Loaded on
  // first use (CUDA's default), a kernel's first launch, or a later driver call in its wake, took
  // an H200 1.3 s: a stall that landed in whichever timed step came first, such as the recovery
  // of an interrupted gpKVS batch, whose kernel takes 0.5 ms (docs/benchmarks.md). Records say
  // which way the run loaded (machine.module_loading).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
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
    if (args[0] == "suite") return suite(rest);
    if (args[0] == "machine") {
      if (!rest.empty()) throw usage_error("machine takes no arguments");
      const std::optional<gpm::device_info> dev = usable_device();
      if (!dev) return 77;
      std::printf("%s\n", gpmbench::machine_json_line(gpmbench::describe_machine(*dev)).c_str());
      return 0;
    }
    if (args[0] == "crash-demo") {
      const std::optional<gpm::device_info> dev = usable_device();
      if (!dev) return 77;
      if (rest.size() == 3 && rest[0] == "--child") {
        return gpmbench::crash_demo_child(rest[1], dev->emulated, std::stoull(rest[2]));
      }
      if (!rest.empty()) throw usage_error("crash-demo takes no arguments");
      return gpmbench::crash_demo(*dev);
    }
    throw usage_error("unknown command " + args[0]);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "gpmbench: %s\n(gpmbench --help shows the usage)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpmbench: error: %s\n", e.what());
    return 1;
  }
}
