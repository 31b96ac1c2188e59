// `gpmkit ooc ...`: the state of a file range used by gpm::ooc mappings. `ooc stat` shows the
// range's epoch log (crash-consistent sync: which epoch the file is at, whether a committed epoch
// waits to be written in place, records a crashed sync left) without changing anything, and with
// --scan streams the range once through a read-only mapping (GPU cache, host cache, file) and
// shows the per-tier telemetry of that pass. `ooc recover` brings the range to its newest
// committed epoch. Paths are plain file paths (no PM directory).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include <gpm/ooc/epoch.hpp>
#include <gpm/ooc/mapping.cuh>

#include "command.hpp"
#include "text.hpp"

namespace gpmkit {

namespace {

namespace fs = std::filesystem;

std::uint64_t offset_of(const parsed_args& args) {
  const auto v = args.value("offset");
  if (!v || *v == "0") return 0;
  return parse_size(*v, "--offset");
}

std::string state_of(const gpm::ooc::epoch_log_info& i) {
  if (!i.exists) return "no epoch log: the range was never mapped crash-consistently";
  if (i.pending) {
    std::string s = "epoch " + std::to_string(i.epoch) +
                    " is committed but may not be in the file yet (a crash hit its write-back): "
                    "the next writing mapping or 'gpmkit ooc recover' writes it in place";
    if (i.staged_records > 0) {
      s += "; " + std::to_string(i.staged_records) + " of its records name lines in " +
           i.staging_path + ": keep that file with the log";
    }
    return s;
  }
  if (i.discard_bytes > 0) {
    return "at epoch " + std::to_string(i.epoch) +
           "; the log holds records of a sync that never committed: recovery drops them";
  }
  return "at epoch " + std::to_string(i.epoch) + ", nothing pending";
}

json::object log_json(const gpm::ooc::epoch_log_info& i) {
  json::object o;
  o.add("log_path", i.log_path);
  o.add("exists", i.exists);
  o.add("state", state_of(i));
  if (!i.exists) return o;
  o.add("data_file", i.data_file);
  if (!i.stripes.empty()) {
    json::array files;
    for (const std::string& f : i.stripes) files.emplace_back(f);
    o.add("stripes", std::move(files));
    o.add("stripe_line_bytes", i.stripe_line_bytes);
  }
  o.add("uuid", i.uuid);
  o.add("created", utc_time(i.created_ns));
  o.add("epoch", i.epoch);
  o.add("pending", i.pending);
  o.add("records", i.records);
  o.add("record_bytes", i.record_bytes);
  o.add("staging_path", i.staging_path);
  o.add("staged_records", i.staged_records);
  o.add("log_bytes", i.log_bytes);
  o.add("discard_bytes", i.discard_bytes);
  return o;
}

// Streams [offset, offset + bytes) once through a read-only mapping, a GPU cache's worth of lines
// at a time (mapping::prefetch), and returns the telemetry of the pass, tier by tier.
json::object scan(const std::string& path, std::uint64_t offset, std::uint64_t bytes,
                  const parsed_args& args) {
  gpm::ooc::mapping_options o;
  o.mode = gpm::ooc::mode::read;
  o.resident = false;  // through the tiers as kernels see them, even when the GPU cache holds all
  if (const auto v = args.value("line-bytes")) o.line_bytes = parse_size(*v, "--line-bytes");
  if (const auto v = args.value("gpu-cache")) o.gpu_cache_bytes = parse_size(*v, "--gpu-cache");
  if (const auto v = args.value("host-cache")) o.host_cache_bytes = parse_size(*v, "--host-cache");
  const auto start = std::chrono::steady_clock::now();
  gpm::ooc::mapping m(path, bytes, offset, o);
  const std::uint64_t chunk = m.gpu_cache_lines() * m.options().line_bytes;
  gpm::stream stream;
  for (std::uint64_t at = 0; at < bytes; at += chunk) {
    m.prefetch(at, std::min(chunk, bytes - at), stream);
    stream.synchronize();
  }
  const gpm::ooc::mapping_stats s = m.stats();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  json::object gpu;
  gpu.add("cache_bytes", m.gpu_cache_lines() * m.options().line_bytes);
  gpu.add("hits", s.gpu_hits);
  gpu.add("misses", s.gpu_misses);
  gpu.add("evictions", s.gpu_evictions);
  gpu.add("io_errors", s.gpu_io_errors);
  gpu.add("wait_seconds", s.gpu_wait_seconds);
  gpu.add("bytes_to_gpu", s.bytes_to_gpu);
  gpu.add("bytes_from_gpu", s.bytes_from_gpu);
  json::object host;
  host.add("cache_bytes", m.host_cache_lines() * m.options().line_bytes);
  host.add("hits", s.host_hits);
  host.add("misses", s.host_misses);
  host.add("evictions", s.host_evictions);
  host.add("read_ahead_lines", s.read_ahead_lines);
  host.add("read_ahead_hits", s.read_ahead_hits);
  json::object file;
  file.add("direct_io", m.direct_io());
  file.add("bytes_read", s.file_bytes_read);
  file.add("bytes_written", s.file_bytes_written);
  file.add("write_behind_lines", s.write_behind_lines);
  file.add("last_io_error", s.last_io_error);
  json::object r;
  r.add("bytes", bytes);
  r.add("line_bytes", m.options().line_bytes);
  r.add("seconds", took.count());
  r.add("map_seconds", s.map_seconds);  // of it, making the mapping
  r.add("gigabytes_per_second", took.count() > 0 ? static_cast<double>(bytes) / took.count() / 1e9
                                                 : 0.0);
  r.add("gpu", std::move(gpu));
  r.add("host", std::move(host));
  r.add("file", std::move(file));
  return r;
}

int run_stat(const parsed_args& args, context& ctx) {
  const std::string path = args.positionals().at(0);
  const std::uint64_t offset = offset_of(args);
  const gpm::ooc::epoch_log_info info = gpm::ooc::inspect_epoch_log(path, offset);
  std::error_code ec;
  const std::uint64_t file_bytes = fs::file_size(path, ec);
  if (ec) throw command_failed("cannot stat " + path + ": " + ec.message());
  json::object o;
  o.add("path", path);
  o.add("offset", offset);
  o.add("file_bytes", file_bytes);
  o.add("epoch_log", log_json(info));
  if (args.flag("scan")) {
    if (info.pending) {
      throw command_failed(path + " has a committed epoch that may not be in the file yet: run "
                                  "'gpmkit ooc recover " + path + "' before scanning it");
    }
    if (offset >= file_bytes) {
      throw command_failed("--offset " + std::to_string(offset) + " is past the end of " + path);
    }
    o.add("scan", scan(path, offset, file_bytes - offset, args));
  }
  emit(ctx, o);
  return kExitOk;
}

int run_recover(const parsed_args& args, context& ctx) {
  const std::string path = args.positionals().at(0);
  const std::uint64_t offset = offset_of(args);
  const gpm::ooc::epoch_recovery r = gpm::ooc::recover_epoch_log(path, offset);
  json::object o;
  o.add("path", path);
  o.add("offset", offset);
  o.add("epoch", r.epoch);
  o.add("replayed", r.replayed);
  o.add("records", r.records);
  o.add("bytes", r.bytes);
  o.add("discarded_bytes", r.discarded_bytes);
  emit(ctx, o);
  return kExitOk;
}

constexpr const char* kRangeHelp =
    "PATH is the data file (not its .ooc-log). --offset names the range's start when the "
    "range was mapped at an offset (each such range has its own log, PATH@OFFSET.ooc-log).";

}  // namespace

std::vector<command> ooc_commands() {
  return {
      {{"ooc stat",
        {"PATH"},
        {{"offset", "BYTES", "the mapped range's start in the file (default 0)"},
         {"scan", "", "stream the range once through a read-only mapping and show per-tier "
                      "telemetry (needs a GPU, or the host emulator)"},
         {"line-bytes", "BYTES", "with --scan: the line size (default 1 MiB)"},
         {"gpu-cache", "BYTES", "with --scan: the GPU cache size (default: see mapping_options)"},
         {"host-cache", "BYTES", "with --scan: the host cache cap (default: see mapping_options)"}},
        "Show a file range's gpm::ooc epoch log: its epoch and what recovery would do.",
        std::string(kRangeHelp) + "\nChanges nothing; --scan only reads."},
       run_stat},
      {{"ooc recover",
        {"PATH"},
        {{"offset", "BYTES", "the mapped range's start in the file (default 0)"}},
        "Bring a file range to its newest committed gpm::ooc epoch.",
        std::string(kRangeHelp) +
            "\nWrites a committed epoch in place, or drops a crashed sync's uncommitted records; "
            "fails (busy) while the range is mapped for writing."},
       run_recover},
  };
}

}  // namespace gpmkit
