"""The load test of bench/load.sh for 60 s (CI's version of the 10-minute run): 1 dispatcher and
8 worker processes of the built binary, 64 readers starting and stopping reads; no errors, no
duplicate or missing element, RSS and fds of every server flat (bench/load.py's bounds)."""

import json
import os
import subprocess
import sys

from conftest import SOURCE_DIR, tfdata_binary


def test_load_60_seconds():
    binary = tfdata_binary()
    # The reader processes run this interpreter: they import the tfdata under test.
    out = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "bench", "load.py"), "--binary", binary,
                          "--seconds", "60"], capture_output=True, text=True, timeout=400)
    sys.stderr.write(out.stderr)  # the report, shown by pytest when the test fails
    assert out.stdout.strip(), f"no summary (exit {out.returncode})"
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["failures"] == [], summary["failures"]
    assert out.returncode == 0
    assert summary["reads"] > 100 and summary["errors"] == summary["duplicates"] == summary["missing"] == 0
    assert all(summary["by_mode"][m]["reads"] > 0 for m in ("parallel_epochs", "distributed_epoch"))
    assert summary["early"] > 0  # some reads were stopped and closed midway
