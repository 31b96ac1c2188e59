// The C API of the GPM paper's libGPM (ASPLOS'22, Table 2) on top of gpmkit, for porting code
// written against it: the primitives here, the logs in gpmlog.hpp and the checkpoints in
// gpmcp.hpp (both included). New code should use gpm::pool, gpm::persist, gpm::hcl_log,
// gpm::conv_log and gpm::checkpointer.
//
//   gpm_map(path, size, create)  maps a persistent region of `size` bytes backed by the pool file
//                                `path` (created if `create`) and returns its GPU address
//   gpm_unmap(path, addr, size)  unmaps it (the pool is closed cleanly)
//   gpm_persist()                device or host: make this thread's prior stores durable
//   gpm_persist_begin/end()      no-ops: libGPM switched Intel DDIO off around kernels so that
//                                GPU writes bypass the CPU caches; gpmkit's platforms have no
//                                DDIO switch, and writes that reach host memory already survive
//                                a process crash (see docs/pool.md, "Durability")
#pragma once

#include <cstddef>

#include <gpm/compat/gpmcp.hpp>
#include <gpm/compat/gpmlog.hpp>
#include <gpm/platform/persist.hpp>

// Returns the region's address for kernels (under CUDA's unified addressing also valid on the
// host), or nullptr with the reason on stderr.
void* gpm_map(const char* path, std::size_t size, bool create);
void gpm_unmap(const char* path, void* addr, std::size_t size);

GPM_HOST_DEVICE inline void gpm_persist() { gpm::persist(); }
inline void gpm_persist_begin() {}
inline void gpm_persist_end() {}
