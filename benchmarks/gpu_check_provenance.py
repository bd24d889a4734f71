"""The earlier entry point of the GPU check's provenance part: now benchmarks/gpu_check.py.

    python benchmarks/gpu_check_provenance.py [--cpu] [--out DIR]   # its add_relu, provenance, cudagraphs stages

Arguments go to gpu_check.py (see its --help); --stages defaults to the ones above here.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--stages" or a.startswith("--stages=") for a in argv):
        argv = ["--stages", "add_relu,provenance,cudagraphs", *argv]
    sys.exit(main(argv))
