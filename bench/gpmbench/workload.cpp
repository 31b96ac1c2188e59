// The workload registry and the runner shared by every workload (see workload.hpp): mode
// selection, the run's scratch directories, ceilings and ratios, and writing the records.
#include "workload.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include <gpm/pool/pool.hpp>

namespace gpmbench {

const std::vector<workload>& workloads() {
  // Workloads of one family share a line.
  // clang-format off
  static const std::vector<workload> all = {
      platform_workload(), random_span_workload(),
      persist_scaling_workload(),
      cp_dnn_workload(), cp_cfd_workload(), cp_blackscholes_workload(), cp_hotspot_workload(),
      cp_hetero_workload(),
      ycsb_workload(), ycsb_key32_workload(), ycsb_kv32_workload(), ycsb_uniform_workload(),
      hash_micro_workload(), hash_batch_sweep_workload(), hash_batch_sweep_key32_workload(),
      hash_batch_sweep_kv32_workload(),
      hash_factors_workload(),
      hash_cache_workload(), hash_load_factor_workload(), hash_resize_recovery_workload(),
      kvs_set_workload(), kvs_mixed_workload(),
      db_insert_workload(), db_update_workload(),
      native::bfs_workload(), native::srad_workload(), native::prefix_sum_workload(),
      tx_atm_a1_workload(), tx_atm_a2_workload(), tx_hash_h1_workload(), tx_hash_h2_workload(),
      tx_hash_lookup_workload(), tx_bvh_1_workload(), tx_bvh_2_workload(), tx_micro_pressure_workload(),
      tx_ring_sweep_workload(),
      tx_residency_sweep_workload(),
      ooc::vectoradd_workload(), ooc::blackscholes_workload(), ooc::binomial_workload(),
      ooc::pathfinder_workload(), ooc::hotspot_workload(), ooc::lavamd_workload(),
      ooc::srad_workload(), ooc::backprop_workload(),
      ooc::ablation_readahead_workload(), ooc::ablation_line_workload(),
      ooc::ablation_cache_workload(), ooc::ablation_output_workload(),
      ooc::ablation_io_threads_workload(), ooc::ablation_readahead_run_workload(),
      ooc::ablation_io_poll_workload(), ooc::ablation_sync_workload(),
      ooc::ablation_fill_workload(), ooc::ablation_write_behind_workload(),
  };
  // clang-format on
  return all;
}

const workload& find_workload(const std::string& name) {
  std::string known;
  for (const workload& w : workloads()) {
    if (w.name == name) return w;
    known += (known.empty() ? "" : ", ") + w.name;
  }
  throw usage_error("no workload named \"" + name + "\"; the workloads are: " + known);
}

std::vector<double> mode_context::repeat(const std::function<double(int call)>& once) const {
  std::vector<double> times;
  for (int call = 0; call < options.warmup + options.repeats; ++call) {
    const double t = once(call);
    if (!(t > 0)) {
      throw std::runtime_error("a repeat took " + std::to_string(t) +
                               " s: the timer cannot resolve work this small; use larger sizes");
    }
    if (call >= options.warmup) times.push_back(t);
  }
  return times;
}

namespace {

// A directory made for this run (mkdtemp) and removed with everything in it afterwards.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& parent) {
    std::filesystem::create_directories(parent);
    std::string name = (std::filesystem::path(parent) / "gpmbench.XXXXXX").string();
    if (mkdtemp(name.data()) == nullptr) {
      throw std::runtime_error("cannot create a scratch directory in " + parent);
    }
    path_ = name;
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (ec) {
      std::fprintf(stderr, "gpmbench: cannot remove %s: %s\n", path_.c_str(), ec.message().c_str());
    }
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string pm_parent(const run_options& o) {
  if (!o.pm_dir.empty()) return o.pm_dir;
  const char* env = std::getenv("GPMKIT_PM_DIR");
  return env != nullptr && *env != '\0' ? env : "/dev/shm";
}

// The chosen modes and, before them, the ceilings they are compared against, in workload order.
std::vector<const mode*> select_modes(const workload& w, const std::vector<std::string>& names) {
  std::map<std::string, const mode*> by_name;
  std::string known;
  for (const mode& m : w.modes) {
    by_name[m.name] = &m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  std::map<std::string, bool> wanted;
  for (const std::string& n : names) {
    if (by_name.count(n) == 0) {
      throw usage_error("workload " + w.name + " has no mode \"" + n +
                        "\"; its modes are: " + known);
    }
    for (const mode* m = by_name[n]; m != nullptr;
         m = m->ceiling.empty() ? nullptr : by_name.at(m->ceiling)) {
      wanted[m->name] = true;
    }
  }
  std::vector<const mode*> chosen;
  for (const mode& m : w.modes) {
    if (names.empty() || wanted.count(m.name) != 0) chosen.push_back(&m);
  }
  return chosen;
}

// "d2h_memcpy" measured in "GB/s" is the ceiling "d2h_memcpy_GBps".
std::string ceiling_key(const std::string& mode, const std::string& unit) {
  std::string slug;
  for (std::size_t i = 0; i < unit.size(); ++i) {
    if (unit.compare(i, 2, "/s") == 0) {
      slug += "ps";
      ++i;
    } else if (unit[i] != '/') {
      slug += unit[i];
    }
  }
  return mode + "_" + slug;
}

std::string human_seconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  }
  return buf;
}

void print_line(const bench_record& r) {
  std::printf("%s/%-26s %10.4g %-6s median %s (min %s, max %s) over %d", r.workload.c_str(),
              r.mode.c_str(), r.throughput_value, r.throughput_unit.c_str(),
              human_seconds(r.summary.median_s).c_str(), human_seconds(r.summary.min_s).c_str(),
              human_seconds(r.summary.max_s).c_str(), r.repeats);
  for (const auto& [key, ratio] : r.ratio_to_ceiling) {
    std::printf("; %.3f of %s", ratio, key.c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

// What a mode's record compares with its ceiling (measured in `ceiling_unit`): its throughput,
// or the metric the measurement names.
double compared_value(const mode& m, const bench_record& r, const std::string& metric,
                      const std::string& ceiling_unit) {
  if (metric.empty()) {
    if (ceiling_unit != r.throughput_unit) {
      throw std::logic_error("mode " + m.name + " (" + r.throughput_unit + ") is compared to " +
                             m.ceiling + ", measured in " + ceiling_unit);
    }
    return r.throughput_value;
  }
  for (const auto& [name, value] : r.metrics) {
    if (name == metric) return value;
  }
  throw std::logic_error("mode " + m.name + " compares its metric " + metric +
                         " with its ceiling but recorded no such metric");
}

// The chosen cases, in workload order ({""} for a workload without cases).
std::vector<std::string> select_cases(const workload& w, const std::vector<std::string>& names) {
  if (names.empty()) return w.cases.empty() ? std::vector<std::string>{""} : w.cases;
  std::string known;
  for (const std::string& c : w.cases) known += (known.empty() ? "" : ", ") + c;
  for (const std::string& n : names) {
    if (std::find(w.cases.begin(), w.cases.end(), n) == w.cases.end()) {
      throw usage_error("workload " + w.name + " has no case \"" + n + "\"" +
                        (known.empty() ? "; it has no cases" : "; its cases are: " + known));
    }
  }
  std::vector<std::string> chosen;
  for (const std::string& c : w.cases) {
    if (std::find(names.begin(), names.end(), c) != names.end()) chosen.push_back(c);
  }
  return chosen;
}

}  // namespace

bool run_workload(const workload& w, const run_options& options, const gpm::device_info& dev) {
  const std::vector<const mode*> chosen = select_modes(w, options.modes);
  const std::vector<std::string> cases = select_cases(w, options.cases);
  const scratch_dir pm(pm_parent(options));
  const scratch_dir disk(options.disk_dir);
  std::printf("gpmbench %s: %s backend on %s\n", w.name.c_str(), GPM_BACKEND_NAME,
              dev.name.c_str());

  bench_record base;
  base.workload = w.name;
  base.backend = GPM_BACKEND_NAME;
  base.machine = describe_machine(dev);
  base.machine.pool_huge_pages = gpm::describe_storage(pm.path()).huge_pages;
  base.repeats = options.repeats;
  base.warmup = options.warmup;
  base.timestamp = utc_timestamp();
  base.commit = source_commit();
  const std::string out = (std::filesystem::path(options.out_dir) / (w.name + ".jsonl")).string();

  struct ceiling {
    std::string key;
    std::string unit;
    double value;
  };
  for (const std::string& case_name : cases) {
    if (!case_name.empty()) std::printf("case %s\n", case_name.c_str());
    std::map<std::string, ceiling> measured;  // by mode name, within the case
    // The modes this case still needs: those not done already, and the ceilings of those.
    std::vector<std::string> left;
    for (const mode* m : chosen) {
      if (!options.done_already || !options.done_already(case_name, m->name))
        left.push_back(m->name);
    }
    if (left.empty()) continue;
    const std::vector<const mode*> order = select_modes(w, left);
    // A mode's record, written (and reported done) as soon as its measurement is whole.
    const auto emit = [&](const mode& m, measurement& result) {
      bench_record r = base;
      r.mode = m.name;
      r.sizes = std::move(result.sizes);
      r.times_s = std::move(result.times_s);
      r.repeats = static_cast<int>(r.times_s.size());
      r.summary = summarize(r.times_s);
      r.throughput_value = result.throughput.value(r.summary.median_s);
      r.throughput_unit = result.throughput.unit;
      r.bytes_persisted = result.bytes_persisted;
      r.metrics = std::move(result.metrics);
      if (!m.ceiling.empty()) {
        const ceiling& c = measured.at(m.ceiling);
        r.ceilings = {{c.key, c.value}};
        r.ratio_to_ceiling = {
            {c.key, compared_value(m, r, result.compared_metric, c.unit) / c.value}};
      }
      measured[m.name] = {ceiling_key(m.name, r.throughput_unit), r.throughput_unit,
                          r.throughput_value};
      append_record(out, r);
      print_line(r);
      if (options.on_done) options.on_done(case_name, m.name);
    };
    // Interleaved: each mode's measurement over the rounds, recorded after the last.
    std::map<std::string, measurement> results;
    std::set<std::string> skipped;
    // Round r runs the modes in their order rotated by r, so that every mode takes every place
    // in turn and none always follows another (a mode's place moved the ooc figures by more than
    // 10% on the H200 machine's virtual disk). Ceilings are looked up only when records are made.
    const int rounds = options.interleave ? options.repeats : 1;
    bool out_of_time = false;
    for (int round = 0; round < rounds && !out_of_time; ++round) {
      run_options per_round = options;
      std::vector<const mode*> turn = order;
      if (options.interleave) {
        per_round.repeats = 1;
        per_round.warmup = round == 0 ? options.warmup : 0;
        std::rotate(turn.begin(), turn.begin() + round % turn.size(), turn.end());
        std::string names;
        for (const mode* m : turn) names += (names.empty() ? "" : ", ") + m->name;
        std::printf("round %d of %d: %s\n", round + 1, rounds, names.c_str());
      }
      const mode_context round_ctx{per_round, dev, pm.path(), disk.path(), case_name};
      for (const mode* m : turn) {
        if (skipped.count(m->name) != 0) continue;
        if (options.deadline && std::chrono::steady_clock::now() >= *options.deadline) {
          std::printf("%s: the budget is spent; %s and the modes after it not run%s\n",
                      w.name.c_str(), m->name.c_str(),
                      options.interleave ? " (the rounds done are recorded)" : "");
          out_of_time = true;
          break;
        }
        measurement result = m->run(round_ctx);
        if (!result.skipped.empty()) {
          std::printf("%s/%-26s skipped: %s\n", w.name.c_str(), m->name.c_str(),
                      result.skipped.c_str());
          skipped.insert(m->name);
          if (options.on_done) options.on_done(case_name, m->name);
          continue;
        }
        if (!options.interleave) {
          emit(*m, result);
          continue;
        }
        measurement& sum = results[m->name];
        if (result.cached && !sum.times_s.empty()) continue;
        result.times_s.insert(result.times_s.begin(), sum.times_s.begin(), sum.times_s.end());
        sum = std::move(result);  // its sizes and metrics: the last round's
      }
    }
    // Interleaved: every mode's rounds, also when the budget cut them short (a mode whose
    // ceiling never ran has nothing to be compared with and is not recorded).
    for (const mode* m : order) {
      if (results.count(m->name) == 0 || skipped.count(m->name) != 0) continue;
      if (!m->ceiling.empty() && measured.count(m->ceiling) == 0) continue;
      emit(*m, results.at(m->name));
    }
    if (out_of_time) return false;
  }
  std::printf("records appended to %s\n", out.c_str());
  return true;
}

}  // namespace gpmbench
