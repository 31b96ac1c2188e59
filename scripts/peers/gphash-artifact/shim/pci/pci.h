// Stand-in for pciutils' <pci/pci.h> when building the GPHash authors' artifact: its
// test/change_ddio.h (always included by test/ycsb_bench.cu) switches Intel DDIO through libpci,
// but only when built with -DDDIO_OFF, which run.sh never sets (no Optane, no DDIO switch on the
// lent machines). These declarations let that header compile; calling any of them aborts.
// Never used by gpmkit itself.
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define PCI_FILL_IDENT 0x0001
#define PCI_FILL_BASES 0x0004
#define PCI_FILL_PHYS_SLOT 0x0100
#define PCI_FILL_NUMA_NODE 0x0800
#define PCI_SUBORDINATE_BUS 0x1a
#define PCI_LOOKUP_DEVICE 2

struct pci_dev {
  struct pci_dev *next;
  unsigned short domain;
  unsigned char bus, dev, func;
  unsigned short vendor_id, device_id, device_class;
  int irq;
  unsigned long base_addr[6];
};
struct pci_access {
  struct pci_dev *devices;
};

static inline void pci_stub_abort(const char *what) {
  fprintf(stderr, "%s: libpci is a stub here (build without -DDDIO_OFF)\n", what);
  abort();
}
static inline struct pci_access *pci_alloc(void) { pci_stub_abort("pci_alloc"); return NULL; }
static inline void pci_init(struct pci_access *) { pci_stub_abort("pci_init"); }
static inline void pci_scan_bus(struct pci_access *) { pci_stub_abort("pci_scan_bus"); }
static inline void pci_cleanup(struct pci_access *) { pci_stub_abort("pci_cleanup"); }
static inline int pci_fill_info(struct pci_dev *, int) {
  pci_stub_abort("pci_fill_info");
  return 0;
}
static inline unsigned char pci_read_byte(struct pci_dev *, int) {
  pci_stub_abort("pci_read_byte");
  return 0;
}
static inline unsigned int pci_read_long(struct pci_dev *, int) {
  pci_stub_abort("pci_read_long");
  return 0;
}
static inline int pci_write_long(struct pci_dev *, int, unsigned int) {
  pci_stub_abort("pci_write_long");
  return 0;
}
static inline char *pci_lookup_name(struct pci_access *, char *buf, int, int, ...) {
  pci_stub_abort("pci_lookup_name");
  return buf;
}
