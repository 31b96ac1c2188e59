// Stand-in for PMDK's <libpmem.h> when building the GPHash authors' artifact (FAST'25) on a
// machine without PMDK: the artifact calls pmem_map_file() alone (src/hash_table.cuh) and never
// pmem_persist/pmem_flush (it fences with its own mfence), so a plain shared mmap of the file is
// what libpmem does for it on a tmpfs file (/dev/shm: not DAX, is_pmem 0). Header-only, so no
// library to link. Never used by gpmkit itself: only scripts/peers/gphash-artifact/run.sh puts
// this folder on the artifact's include path.
//
// Follows libpmem's pmem_map_file(3): PMEM_FILE_CREATE needs len > 0 and sets the file to len
// bytes (posix_fallocate unless PMEM_FILE_SPARSE), without it len must be 0 and the whole file is
// mapped; PMEM_FILE_EXCL adds O_EXCL; PMEM_MMAP_HINT (hex) is the mapping's address hint, as
// libpmem reads it. One addition: GPHASH_PM_MAP_BYTES (decimal) caps a created file's length,
// because the artifact asks for 16 GiB whatever the table needs, and pinning (cudaHostRegister)
// 16 GiB of tmpfs costs seconds per run; the cap must cover what the artifact will touch, or it
// faults past the end of the mapping (run.sh computes it from the table size).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define PMEM_FILE_CREATE (1 << 0)
#define PMEM_FILE_EXCL (1 << 1)
#define PMEM_FILE_SPARSE (1 << 2)
#define PMEM_FILE_TMPFILE (1 << 3)

static inline void *pmem_map_file(const char *path, size_t len, int flags, mode_t mode,
                                  size_t *mapped_lenp, int *is_pmemp) {
  if ((flags & PMEM_FILE_CREATE) ? len == 0 : len != 0) {
    fprintf(stderr, "pmem shim: %s: len must be nonzero with PMEM_FILE_CREATE, zero without\n",
            path);
    errno = EINVAL;
    return NULL;
  }
  const char *cap_text = getenv("GPHASH_PM_MAP_BYTES");
  if ((flags & PMEM_FILE_CREATE) && cap_text != NULL && *cap_text != '\0') {
    const unsigned long long cap = strtoull(cap_text, NULL, 10);
    if (cap != 0 && cap < len) {
      fprintf(stderr, "pmem shim: %s: %llu of the %zu bytes asked for (GPHASH_PM_MAP_BYTES)\n",
              path, cap, len);
      len = (size_t)cap;
    }
  }
  int open_flags = O_RDWR;
  if (flags & PMEM_FILE_CREATE) open_flags |= O_CREAT;
  if (flags & PMEM_FILE_EXCL) open_flags |= O_EXCL;
  const int fd = open(path, open_flags, mode);
  if (fd < 0) {
    perror("pmem shim: open");
    return NULL;
  }
  if (flags & PMEM_FILE_CREATE) {
    if (ftruncate(fd, (off_t)len) != 0) {
      perror("pmem shim: ftruncate");
      close(fd);
      return NULL;
    }
    if (!(flags & PMEM_FILE_SPARSE)) {
      // As libpmem: the space is taken now, so a full tmpfs fails here and not with a SIGBUS in
      // the middle of a run. A file system that cannot allocate keeps a sparse file.
      const int err = posix_fallocate(fd, 0, (off_t)len);
      if (err == ENOSPC) {
        fprintf(stderr, "pmem shim: %s: no room for %zu bytes\n", path, len);
        close(fd);
        errno = err;
        return NULL;
      }
      if (err != 0) {
        fprintf(stderr, "pmem shim: %s: posix_fallocate: %s; the file stays sparse\n", path,
                strerror(err));
      }
    }
  } else {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      perror("pmem shim: fstat");
      close(fd);
      return NULL;
    }
    len = (size_t)st.st_size;
  }
  void *hint = NULL;
  const char *hint_text = getenv("PMEM_MMAP_HINT");
  if (hint_text != NULL && *hint_text != '\0') {
    hint = (void *)(uintptr_t)strtoull(hint_text, NULL, 16);
  }
  void *addr = mmap(hint, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (addr == MAP_FAILED) {
    perror("pmem shim: mmap");
    return NULL;
  }
  if (mapped_lenp != NULL) *mapped_lenp = len;
  if (is_pmemp != NULL) *is_pmemp = 0;
  return addr;
}

static inline int pmem_unmap(void *addr, size_t len) { return munmap(addr, len); }
