// Facts about the directories pools and snapshots live in, shared by `gpmkit info` and the pool
// commands: which directory, which file system, how much space, and whether it can hold
// GPU-mapped pools or power-loss-durable snapshots. Reads only; never creates a directory.
#pragma once

#include <cstdint>
#include <string>

#include <gpm/pool/pool.hpp>

#include "json.hpp"

namespace gpmkit {

struct directory_facts {
  std::string path;
  bool exists = false;
  gpm::storage_info storage;  // of `path`, or of its nearest existing ancestor
};

directory_facts describe_directory(const std::string& path);

// The PM and snapshot directories that `options` (and the environment) select.
std::string pm_dir(const gpm::pool_options& options);
std::string snapshot_dir(const gpm::pool_options& options);

json::object to_json(const directory_facts& d);

}  // namespace gpmkit
