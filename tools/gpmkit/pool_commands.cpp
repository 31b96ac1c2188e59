// `gpmkit pool ...`: create, inspect, check, snapshot, restore and remove pools through the
// gpm::pool API (and the pool's own rules for where files go). Inspection (info, ls, check) never
// writes a pool and needs no layout name: it learns the layout from pool::check and opens
// read-only. Only `snapshot` opens a pool for writing, and it refuses a pool that was not cleanly
// closed (see run_snapshot).
#include <filesystem>
#include <string>

#include <gpm/pool/pool.hpp>

#include "command.hpp"
#include "system_info.hpp"
#include "text.hpp"

namespace gpmkit {

namespace {

namespace fs = std::filesystem;

std::string resolved(const parsed_args& args, const context& ctx) {
  return gpm::pool::resolve(args.positionals().at(0), ctx.options);
}

// Options for a pool the CLI creates or opens: never mapped into the GPU (that would only pin its
// memory), never restored from a snapshot behind the user's back, notices on stderr.
gpm::pool_options cli_options(const context& ctx, bool read_only) {
  gpm::pool_options o = ctx.options;
  o.gpu = gpm::gpu_mapping::none;
  o.read_only = read_only;
  o.restore_from_snapshot = false;
  o.notice = [&ctx](const std::string& text) { note(ctx, text); };
  return o;
}

// One sentence for a failed check: the first problem, and how many more there are.
std::string check_failure(const std::string& path, const gpm::pool_check& c) {
  const std::string first = c.problems.empty() ? "unknown problem" : c.problems.front();
  // A pool that could not be examined (missing, busy, unreadable) reports that error as it is;
  // a problem found inside the pool makes it inconsistent.
  std::string s = c.failure ? first : "pool " + path + " is inconsistent: " + first;
  if (c.problems.size() > 1) {
    s += " (and " + std::to_string(c.problems.size() - 1) + " more problems: gpmkit pool check " +
         "lists them)";
  }
  return s;
}

// Validates the pool; unless it is consistent, throws gpm::error naming the first problem, with
// the code of the failure to examine it, or corrupt for an inconsistent pool.
gpm::pool_check checked(const std::string& path, const context& ctx) {
  gpm::pool_check c = gpm::pool::check(path, ctx.options);
  if (!c.ok || !c.info) {
    throw gpm::error(c.failure.value_or(gpm::errc::corrupt), check_failure(path, c));
  }
  return c;
}

std::string durability_of(const std::string& path) {
  return std::string(gpm::to_string(gpm::describe_storage(path).pool_durability));
}

json::object info_json(const gpm::pool_info& i, const context& ctx) {
  json::object o;
  o.add("path", i.path);
  o.add("layout", i.layout);
  o.add("uuid", i.uuid);
  o.add("format_version", std::to_string(i.major) + "." + std::to_string(i.minor));
  o.add("bytes", i.bytes);
  o.add("heap_bytes", i.heap_bytes);
  o.add("free_bytes", i.free_bytes);
  o.add("objects", static_cast<std::uint64_t>(i.objects));
  o.add("directory_capacity", i.directory_capacity);
  o.add("clean_shutdown", i.clean_shutdown);
  o.add("open_count", i.open_count);
  o.add("root_seq", i.root_seq);
  o.add("last_snapshot_seq", i.last_snapshot_seq);
  o.add("created", utc_time(i.created_ns));
  o.add("durability", durability_of(i.path));
  const std::string snap = gpm::pool::snapshot_location(i.path, ctx.options);
  o.add("snapshot_dir", snap);
  std::error_code ec;
  o.add("snapshot_exists", fs::exists(snap + "/manifest", ec));
  return o;
}

// A snapshot taken (`written`: with what it wrote) or restored.
json::object snapshot_json(const std::string& path, const gpm::snapshot_result& r, bool written,
                           const context& ctx) {
  json::object o;
  o.add("path", path);
  o.add("snapshot_dir", gpm::pool::snapshot_location(path, ctx.options));
  o.add("seq", r.seq);
  if (written) o.add("pages_changed", r.pages_changed);
  o.add("pages_total", r.pages_total);
  if (written) o.add("bytes_written", r.bytes_written);
  o.add("seconds", r.seconds);
  return o;
}

constexpr const char* kUncleanNote =
    "the pool was not cleanly closed: its last writer crashed or is still running; the program "
    "that owns it runs its recovery when it next opens it";

int run_create(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  const std::uint64_t bytes = parse_size(*args.value("size"), "--size");
  gpm::pool_options o = cli_options(ctx, false);
  if (const auto n = args.value("objects")) o.directory_capacity = parse_count(*n, "--objects");
  // The pool is created where a GPU can map it, but not mapped: registering it here would only
  // pin its memory.
  gpm::pool::require_gpu_mappable(path, o);
  gpm::pool::create(path, bytes, *args.value("layout"), o).close();
  // What `pool info` shows, read back after the close.
  emit(ctx, info_json(*checked(path, ctx).info, ctx));
  return kExitOk;
}

int run_info(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  const gpm::pool_check c = checked(path, ctx);
  json::object o = info_json(*c.info, ctx);
  if (!c.notes.empty()) o.add("notes", json::array(c.notes.begin(), c.notes.end()));
  emit(ctx, o);
  return kExitOk;
}

int run_ls(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  const gpm::pool_check c = checked(path, ctx);
  gpm::pool p = gpm::pool::open(path, c.info->layout, cli_options(ctx, true));
  json::array objects;
  for (const gpm::pool_object& obj : p.objects()) {
    json::object row;
    row.add("name", obj.name);
    row.add("offset", obj.offset);
    row.add("bytes", obj.bytes);
    row.add("alignment", obj.alignment);
    row.add("type_tag", obj.type_tag);
    objects.push_back(std::move(row));
  }
  json::object o;
  o.add("path", path);
  o.add("layout", c.info->layout);
  o.add("objects", std::move(objects));
  emit(ctx, o);
  return kExitOk;
}

int run_check(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  const gpm::pool_check c = gpm::pool::check(path, ctx.options);
  std::vector<std::string> notes = c.notes;
  if (c.info && !c.info->clean_shutdown) notes.push_back(kUncleanNote);
  json::object o;
  o.add("path", path);
  o.add("consistent", c.ok);
  o.add("problems", json::array(c.problems.begin(), c.problems.end()));
  o.add("notes", json::array(notes.begin(), notes.end()));
  if (c.info) o.add("pool", info_json(*c.info, ctx));
  emit(ctx, o);
  if (c.ok) return kExitOk;
  *ctx.err << "gpmkit: " << printable(check_failure(path, c)) << '\n';
  return kExitFailure;
}

int run_snapshot(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  const gpm::pool_check c = checked(path, ctx);
  const std::string layout = args.value("layout").value_or(c.info->layout);
  if (!c.info->clean_shutdown) {
    // Opening for writing and closing would mark the pool cleanly closed, and its program would
    // then skip the recovery the crash calls for.
    throw command_failed("pool " + path +
                         " was not cleanly closed (its last writer crashed or "
                         "is still running): open it with its program first so that recovery "
                         "runs, then snapshot it");
  }
  gpm::pool p = gpm::pool::open(path, layout, cli_options(ctx, false));
  const gpm::snapshot_result r = p.snapshot();
  p.close();
  emit(ctx, snapshot_json(path, r, true, ctx));
  return kExitOk;
}

int run_restore(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  std::error_code ec;
  if (fs::exists(path, ec) && !args.flag("force")) {
    throw command_failed("pool " + path +
                         " exists; restoring replaces it with its newest "
                         "snapshot and loses every change made since: pass --force to replace "
                         "it, or remove it first (gpmkit pool rm)");
  }
  const gpm::snapshot_result r = gpm::pool::restore(path, ctx.options);
  json::object o = snapshot_json(path, r, false, ctx);
  o.add("note",
        "the restored pool reads as not cleanly closed, so the program that owns it "
        "runs its recovery when it next opens it");
  emit(ctx, o);
  return kExitOk;
}

int run_rm(const parsed_args& args, context& ctx) {
  const std::string path = resolved(args, ctx);
  const bool with_snapshot = args.flag("snapshot");
  const std::string snap = gpm::pool::snapshot_location(path, ctx.options);
  std::error_code ec;
  const bool had_pool = fs::exists(path, ec);
  const bool had_snapshot = with_snapshot && fs::exists(snap, ec);
  gpm::pool::remove(path, ctx.options, with_snapshot);
  json::object o;
  o.add("path", path);
  o.add("removed_pool", had_pool);
  o.add("removed_snapshot", had_snapshot);
  if (had_snapshot) o.add("snapshot_dir", snap);
  if (!with_snapshot && fs::exists(snap, ec)) {
    o.add("note", "the snapshot in " + snap +
                      " is kept: gpmkit pool restore brings the pool "
                      "back; gpmkit pool rm --snapshot removes it");
  }
  emit(ctx, o);
  return kExitOk;
}

const char* kPathHelp =
    "PATH names the pool file; a name without a '/' is a file in the PM directory.";

}  // namespace

std::vector<command> pool_commands() {
  return {
      {{"pool create",
        {"PATH"},
        {{"size", "BYTES", "pool size: bytes or K, M, G, T (KiB...) suffixes; a multiple of 4096",
          true},
         {"layout", "NAME", "the layout name programs open the pool with (at most 63 bytes)", true},
         {"objects", "N", "named objects the pool's directory holds (default 1024)"}},
        "Create a pool in a tmpfs directory (or on a device-DAX node).",
        std::string(kPathHelp) +
            "\nThe directory must be on tmpfs (or similar shared memory): a GPU cannot map "
            "writable shared mappings of files on disk file systems."},
       run_create},
      {{"pool info",
        {"PATH"},
        {},
        "Show a pool's header and state (no layout name needed).",
        kPathHelp},
       run_info},
      {{"pool ls", {"PATH"}, {}, "List a pool's named objects in offset order.", kPathHelp},
       run_ls},
      {{"pool check",
        {"PATH"},
        {},
        "Validate a pool without changing it; print every problem and note.",
        std::string(kPathHelp) +
            "\nExit status: 0 if the pool is consistent, 1 if it is not (or cannot be read)."},
       run_check},
      {{"pool snapshot",
        {"PATH"},
        {{"layout", "NAME", "refuse unless the pool holds this layout (default: its own)"}},
        "Write the pages changed since the last snapshot to the pool's snapshot on disk.",
        std::string(kPathHelp) +
            "\nThe pool must not be open for writing elsewhere, and must have been cleanly "
            "closed."},
       run_snapshot},
      {{"pool restore",
        {"PATH"},
        {{"force", "", "replace the pool file if it exists"}},
        "Recreate a pool file from its newest valid snapshot.",
        std::string(kPathHelp) +
            "\nThe restored pool reads as not cleanly closed, so its program runs recovery."},
       run_restore},
      {{"pool rm",
        {"PATH"},
        {{"snapshot", "", "also remove the pool's snapshot"}},
        "Delete a pool file (and its snapshot with --snapshot).",
        std::string(kPathHelp) + "\nFails if the pool is open."},
       run_rm},
  };
}

}  // namespace gpmkit
