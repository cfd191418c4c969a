"""A subprocess agent that fails in the way named by its first argument."""

import os
import sys
import time
from pathlib import Path

mode = sys.argv[1]
if mode == "exit3":
    print("partial output")
    print("something broke", file=sys.stderr)
    sys.exit(3)
if mode == "partial-hang":  # says something, then never finishes
    print("partial output", flush=True)
    print("still thinking", file=sys.stderr, flush=True)
    time.sleep(600)
if mode == "hang":
    # a grandchild in the same process group, recorded so the test can check it died
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        sys.exit(0)
    Path(sys.argv[2]).write_text(f"{os.getpid()} {pid}")
    time.sleep(600)
