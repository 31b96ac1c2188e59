// The checkpoint API of the GPM paper's libGPM (ASPLOS'22, Table 2, "Checkpointing" rows) on top
// of gpm::checkpointer, for porting code written against it. New code should use
// gpm::checkpointer, whose chunks have names (include/gpm/checkpoint/checkpoint.hpp).
//
//   gpmcp_create(path, size, elements, groups)  creates a checkpoint pool at `path` for up to
//                            `size` bytes of data in at most `elements` buffers per group and
//                            `groups` groups; nullptr (reason on stderr) on failure
//   gpmcp_open(path)         opens it again, e.g. after a crash
//   gpmcp_close(cp)          closes it cleanly
//   gpmcp_register(cp, addr, size, group)   registers a GPU buffer; as in libGPM, a buffer is
//                            known by its group and its position in the group's registration
//                            order, so register in the same order after a restart
//   gpmcp_checkpoint(cp, group)  copies the group into the working copies, persists, flips
//   gpmcp_restore(cp, group)     copies the consistent copies back into the buffers
//
// The int-returning calls return 0 on success and -1 on failure, with the reason on stderr.
#pragma once

#include <cstddef>

struct gpmcp;

gpmcp* gpmcp_create(const char* path, std::size_t size, std::size_t elements, unsigned groups);
gpmcp* gpmcp_open(const char* path);
void gpmcp_close(gpmcp* cp);
int gpmcp_register(gpmcp* cp, void* addr, std::size_t size, unsigned group);
int gpmcp_checkpoint(gpmcp* cp, unsigned group);
int gpmcp_restore(gpmcp* cp, unsigned group);
