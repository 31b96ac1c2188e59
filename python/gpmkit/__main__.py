"""python -m gpmkit info: what this gpmkit runs on, as `gpmkit info` prints it."""
import sys

import gpmkit


def info():
    d = gpmkit.device_info()
    print(f"gpmkit backend: {gpmkit.backend()}")
    if d["present"]:
        kind = "emulated" if d["emulated"] else f"compute {d['compute_capability']}"
        print(f"device: {d['name']} ({kind}, {d['multiprocessors']} multiprocessors, "
              f"{d['global_memory'] >> 20} MiB)")
    else:
        print(f"device: none ({d['absent_reason']})")
    print(f"PM directory: {gpmkit.pm_directory()}")
    return 0


def main(argv):
    if argv[1:] != ["info"]:
        print("usage: python -m gpmkit info", file=sys.stderr)
        return 2
    return info()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
