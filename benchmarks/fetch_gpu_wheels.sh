#!/usr/bin/env bash
# The wheels kerneltui's runtime needs on the GPU machine (Python 3.12, x86-64, no registry there),
# into .whl/ (ignored: /.whl/ in .git/info/exclude), to carry with `run`'s carry=[".whl"].
#
#     bash benchmarks/fetch_gpu_wheels.sh          # here, where pip reaches a registry
#
# The machine's image (/work/.library/device/KINDS.md) lacks orjson, msgspec and textual. It holds
# numpy (2.5), pyarrow, python-dateutil, typing-extensions and torch, which stay the image's, and
# pandas, pygments and textual's other needs in versions nobody has read: those travel too, so
# that /tmp/site (first on PYTHONPATH) has the versions of the dev venv the tests pass with.
# pyarrow (the column cache, ~45 MB) does not: the tree and the wheels must stay under 64 MiB.
# One version per name: two stop `pip install --no-index` there.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(
    orjson==3.13.0          # kerneltui.trace (compiled: cp312 manylinux wheel)
    msgspec==0.23.0         # kerneltui.trace.repair, the decoder (compiled)
    textual==8.2.8          # kerneltui open / the TUI
    rich==15.0.0            # textual
    markdown-it-py==4.3.0   # textual, rich
    mdurl==0.1.2            # markdown-it-py
    mdit-py-plugins==0.7.0  # textual
    linkify-it-py==2.2.0    # textual (markdown-it-py[linkify])
    uc-micro-py==2.0.0      # linkify-it-py
    platformdirs==4.14.9    # textual
    pygments==2.21.0        # textual (>=2.19.2), rich: the image's may be older
    pandas==3.1.1           # kerneltui.trace (12 MB; needs numpy>=2.0.2, python-dateutil>=2.9: the image's)
)
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    --platform any -d .whl "${WHEELS[@]}"
ls -1 .whl
du -ch .whl/*.whl | tail -1
