#!/usr/bin/env bash
# The GPU check on the device machine, from a bare start: the carried wheels (no registry there),
# the C scanner built for that Python (else the Python decoder), then benchmarks/gpu_check.py.
#
#     bash benchmarks/fetch_gpu_wheels.sh       # once, here: fills .whl/ (ignored)
#     run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=360)
#
# kerneltui runs from this checkout (PYTHONPATH), not pip-installed. Writes $OUT/setup.log, then
# what gpu_check.py writes there: results.json, results.txt, check.log, traces.tar, traces/.
# Arguments go to gpu_check.py (--cpu --quick: the dry run; WHEELS=DIR: other wheels, e.g. for
# another Python, to try this script elsewhere).
set -u
cd "$(dirname "$0")/.."
export OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
WHEELS="${WHEELS:-.whl}"
SITE="${SITE:-/tmp/site}"

main() {
started=$(date +%s)
echo "# $(date -u +%FT%TZ) $(uname -m); $("$PY" -V 2>&1) at $(command -v "$PY"); $(nproc) CPUs"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader 2>&1 | head -2

if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "gpu_check.sh: no wheels in $WHEELS: run bash benchmarks/fetch_gpu_wheels.sh and carry .whl"
    return 2
fi
if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl; then
    echo "# pip could not install the wheels: unpacking them into $SITE instead"   # a wheel is a zip
    for w in "$WHEELS"/*.whl; do "$PY" -m zipfile -e "$w" "$SITE" || { echo "gpu_check.sh: cannot unpack $w"; return 2; }; done
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "# wheels installed into $SITE: $(ls "$WHEELS" | tr '\n' ' ')"

# The C scanner (kerneltui/trace/_scan.c) for this Python, in place; optional in setup.py, so a
# missing compiler or header leaves the Python decoder, which reads the same columns.
timeout 120 "$PY" setup.py -q build_ext --inplace -b /tmp/kerneltui-build -t /tmp/kerneltui-build >/tmp/kerneltui-build.log 2>&1
if ! "$PY" -c "import sys; from kerneltui.trace import scanner; sys.exit(scanner._scan is None)" 2>/dev/null; then
    echo "# the C scanner did not build ($(grep -m1 -i -E 'error|warning' /tmp/kerneltui-build.log)): the Python decoder"
    export KERNELTUI_DECODER=python
else
    echo "# the C scanner is built: $(ls kerneltui/trace/_scan*.so | tr '\n' ' ')"
fi
echo "# setup took $(( $(date +%s) - started )) s"

"$PY" benchmarks/gpu_check.py --out "$OUT" "$@"
rc=$?
echo "# gpu_check.py exit $rc; $(( $(date +%s) - started )) s in all"
return $rc
}

# everything printed also goes to $OUT/setup.log (gpu_check.py writes its own files as it goes)
main "$@" 2>&1 | tee -a "$OUT/setup.log"
exit "${PIPESTATUS[0]}"
