"""The crash tests' child process: run it, let it acknowledge some durable steps, SIGKILL it."""
import os
import signal
import subprocess
import sys


def kill_after_acks(script, args, acks):
    """Runs `script` (python -c) with `args`, reads `acks` of the step numbers it prints once a
    step is durable, kills it with SIGKILL and returns the last step it acknowledged (lines
    printed before the kill landed included)."""
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                             text=True)
    acked = 0
    for _ in range(acks):
        acked = int(child.stdout.readline())
    os.kill(child.pid, signal.SIGKILL)
    rest = child.stdout.read().split()
    child.wait()
    return int(rest[-1]) if rest else acked
