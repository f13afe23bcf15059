# The lane-by-lane emulations of a family's kernels (tests/<family>/emulation/*.py: pure Python in fp64, each checks its
# kernel's index math against the naive product and exits non-zero on a mismatch) as pytest cases, so the test
# command runs them on every change (about a second each).
import subprocess
import sys
from pathlib import Path


def emulation_scripts(test_file):
    """The emulation scripts beside a family's test file."""
    return sorted((Path(test_file).resolve().parent / "emulation").glob("*.py"))


def run_emulation(script):
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{script.name} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
