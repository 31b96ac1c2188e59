// gpmbench records and their JSON form (see record.hpp).
#include "record.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "json.hpp"
#include "source_commit.hpp"

namespace gpmbench {

namespace json = gpmkit::json;

double throughput_basis::value(double median_s) const {
  return unit == "ns" ? median_s * 1e9 / per_repeat : per_repeat / median_s;
}

throughput_basis gigabytes(std::uint64_t bytes) {
  return {"GB/s", static_cast<double>(bytes) / 1e9};
}
throughput_basis mega_operations(std::uint64_t ops) {
  return {"Mop/s", static_cast<double>(ops) / 1e6};
}
throughput_basis nanoseconds_each(std::uint64_t ops) { return {"ns", static_cast<double>(ops)}; }

namespace {

template <class T>
json::value optional_value(const std::optional<T>& v) {
  return v ? json::value(*v) : json::value();
}

json::object machine_json(const machine_info& m) {
  json::object o;
  o.add("hostname", m.hostname);
  o.add("cpu", m.cpu);
  o.add("cores", m.cores);
  o.add("gpu", m.gpu);
  o.add("compute_capability", m.compute_capability);
  o.add("multiprocessors", m.multiprocessors);
  o.add("pcie_generation", optional_value(m.pcie_generation));
  o.add("pcie_width", optional_value(m.pcie_width));
  o.add("driver", optional_value(m.driver));
  o.add("cuda_runtime", optional_value(m.cuda_runtime));
  o.add("pool_huge_pages", m.pool_huge_pages);
  o.add("module_loading", optional_value(m.module_loading));
  return o;
}

template <class Pairs>
json::object named_json(const Pairs& pairs) {
  json::object o;
  for (const auto& [name, v] : pairs) o.add(name, v);
  return o;
}

}  // namespace

std::string to_json_line(const bench_record& r) {
  json::array times;
  for (const double t : r.times_s) times.emplace_back(t);
  json::object spread;
  spread.add("min_s", r.summary.min_s);
  spread.add("p25_s", r.summary.p25_s);
  spread.add("p75_s", r.summary.p75_s);
  spread.add("max_s", r.summary.max_s);
  json::object throughput;
  throughput.add("value", r.throughput_value);
  throughput.add("unit", r.throughput_unit);
  json::object o;
  o.add("schema", kSchema);
  o.add("workload", r.workload);
  o.add("mode", r.mode);
  o.add("backend", r.backend);
  o.add("machine", machine_json(r.machine));
  o.add("sizes", named_json(r.sizes));
  o.add("repeats", r.repeats);
  o.add("warmup", r.warmup);
  o.add("times_s", std::move(times));
  o.add("median_s", r.summary.median_s);
  o.add("spread", std::move(spread));
  o.add("throughput", std::move(throughput));
  o.add("bytes_persisted", r.bytes_persisted);
  o.add("ceilings", named_json(r.ceilings));
  o.add("ratio_to_ceiling", named_json(r.ratio_to_ceiling));
  o.add("metrics", named_json(r.metrics));
  o.add("timestamp", r.timestamp);
  o.add("commit", r.commit);
  return json::to_line(o);
}

std::string machine_json_line(const machine_info& m) { return json::to_line(machine_json(m)); }

void append_record(const std::string& path, const bench_record& r) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::app);
  out << to_json_line(r) << '\n';
  out.flush();
  if (!out) throw std::runtime_error("cannot append a record to " + path);
}

std::string source_commit() {
  const char* env = std::getenv("GPMKIT_COMMIT");
  return env != nullptr && *env != '\0' ? env : GPMBENCH_SOURCE_COMMIT;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count()));
  return buf;
}

}  // namespace gpmbench
