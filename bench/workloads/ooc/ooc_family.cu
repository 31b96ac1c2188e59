// What every gpmbench `ooc` workload shares and is not a template (see ooc_engine.cuh): the
// regimes' sizes and caps, the case directories, the disk-sequential ceiling and the disk metrics.
#include <filesystem>
#include <stdexcept>

#include "ooc_engine.cuh"

namespace gpmbench::ooc {

std::uint64_t default_line(const mode_context& ctx) {
  return ctx.device.emulated ? (4u << 10) : (1u << 20);
}

std::uint64_t base_bytes(const mode_context& ctx, std::uint64_t gpu) {
  if (ctx.options.bytes) return *ctx.options.bytes;
  if (ctx.options.quick) return 512u << 10;
  return ctx.device.emulated ? std::max<std::uint64_t>(512u << 10, gpu >> 10) : gpu;
}

settings regime_settings(const mode_context& ctx, std::uint64_t base) {
  settings s;
  s.line = default_line(ctx);
  const auto lines = [&](std::uint64_t bytes) {
    return std::max<std::uint64_t>(1, bytes / s.line) * s.line;
  };
  s.gpu_cache = lines(base / 8);
  s.host_cache = lines(base / 2);
  if (ctx.case_name == "in-gpu") {
    s.where = regime::in_gpu;
    s.footprint = base / 16;
  } else if (ctx.case_name == "in-host") {
    s.where = regime::in_host;
    s.footprint = base / 4;
  } else if (ctx.case_name == "out-of-core") {
    s.where = regime::out_of_core;
    s.footprint = base;
  } else {
    throw std::logic_error("no ooc regime named \"" + ctx.case_name + "\"");
  }
  return s;
}

settings ablation_settings(const mode_context& ctx, std::uint64_t base) {
  // A case named <regime>-<variation> runs in that regime (in-gpu, in-host), the others out of
  // core.
  mode_context ooc = ctx;
  ooc.case_name = "out-of-core";
  std::string c = ctx.case_name;
  for (const std::string r : {"in-gpu-", "in-host-"}) {
    if (c.rfind(r, 0) == 0) {
      ooc.case_name = r.substr(0, r.size() - 1);
      c = c.substr(r.size());
    }
  }
  settings s = regime_settings(ooc, base);
  const auto divisor = [&](std::size_t at) { return std::stoull(c.substr(at)); };
  const auto lines = [&](std::uint64_t bytes) {
    return std::max<std::uint64_t>(1, bytes / s.line) * s.line;
  };
  if (c == "read-ahead-off") {
    s.read_ahead = false;
  } else if (c.rfind("line-div", 0) == 0) {
    s.line /= divisor(8);
  } else if (c.rfind("line-x", 0) == 0) {
    s.line *= divisor(6);
  } else if (c.rfind("gpu-div", 0) == 0) {
    s.gpu_cache = lines(base / divisor(7));
  } else if (c.rfind("host-div", 0) == 0) {
    s.host_cache = lines(base / divisor(8));
  } else if (c == "outputs-write") {
    s.write_mode_outputs = true;
  } else if (c == "sync-crash-consistent") {
    s.crash_consistent_outputs = true;
  } else if (c.rfind("io-threads-", 0) == 0) {
    s.io_threads = static_cast<std::uint32_t>(divisor(11));
  } else if (c.rfind("poll-us-", 0) == 0) {
    s.idle_poll_us = static_cast<std::uint32_t>(divisor(8));
  } else if (c.rfind("ra-run-", 0) == 0) {  // ra-run-<MiB>, at least a line
    s.read_ahead_run = std::max<std::uint64_t>(s.line, (divisor(7) << 20) / s.line * s.line);
  } else if (c == "write-behind-off") {
    s.write_behind = false;
  } else if (c != "read-ahead-on" && c != "outputs-read-write" && c != "sync-plain" &&
             c != "write-behind-on") {
    throw std::logic_error("no ooc ablation case named \"" + c + "\"");
  }
  return s;
}

std::string case_dir(const mode_context& ctx, family_state& st) {
  const std::string dir = ctx.disk_dir + "/" + (ctx.case_name.empty() ? "run" : ctx.case_name);
  if (!st.inputs_key.empty() && st.inputs_key.rfind(dir + "#", 0) != 0) {
    // A new case: the previous case's files go, so the disk holds one case at a time.
    std::filesystem::remove_all(st.inputs_key.substr(0, st.inputs_key.find('#')));
    st.inputs_key.clear();
  }
  std::filesystem::create_directories(dir);
  return dir;
}

measurement disk_mode(const mode_context& ctx, family_state& st) {
  const bool again = st.disk_dir == ctx.disk_dir;
  if (!again) {
    const std::uint64_t bytes =
        ctx.options.quick ? (1u << 20) : ctx.device.emulated ? (8u << 20) : (256u << 20);
    note_if_in_memory(ctx.disk_dir);
    disk_bandwidth bw;
    measurement m;
    m.times_s = ctx.repeat([&](int) {
      bw = measure_disk(ctx.disk_dir, bytes);
      return static_cast<double>(bytes) / 1e9 / bw.best_read_GBps();
    });
    m.sizes = {{"bytes", bytes}};
    m.throughput = gigabytes(bytes);
    m.metrics = {{"read_GBps", bw.read_GBps},
                 {"write_GBps", bw.write_GBps},
                 {"read_whole_GBps", bw.read_whole_GBps},
                 {"write_whole_GBps", bw.write_whole_GBps},
                 {"direct_io", bw.direct ? 1.0 : 0.0}};
    st.disk = bw;
    st.disk_dir = ctx.disk_dir;
    st.disk_record = m;
  }
  measurement m = st.disk_record;
  m.cached = again;
  m.metrics.push_back({"measured_in_earlier_case", again ? 1.0 : 0.0});
  return m;
}

void add_disk_metrics(measurement& m, const family_state& st, const traffic& t, double median_s) {
  const double read = static_cast<double>(t.disk_read), written = static_cast<double>(t.disk_written);
  // The time the disk needs at its best measured sequential speeds to move this traffic, over
  // the time the run took: 1 means the run went as fast as the disk.
  const double disk_s =
      read / 1e9 / st.disk.best_read_GBps() + written / 1e9 / st.disk.best_write_GBps();
  m.metrics.push_back({"disk_read_bytes", read});
  m.metrics.push_back({"disk_written_bytes", written});
  m.metrics.push_back({"achieved_disk_GBps", (read + written) / 1e9 / median_s});
  m.metrics.push_back({"disk_fraction", disk_s / median_s});
}

}  // namespace gpmbench::ooc
