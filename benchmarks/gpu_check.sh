#!/usr/bin/env bash
# The one device check, from a fresh lent GPU machine (benchmarks/gpu_check.py prints its table).
#
#   here:   python benchmarks/carried_wheels.py         # .whl/: what the machine lacks (about 50 MiB); .whl is
#                                                        # excluded from git (.git/info/exclude) and carried
#   there:  bash benchmarks/gpu_check.sh [ARGS]          # installs .whl/ if present, then runs the check
#
# ARGS go to gpu_check.py (--tiny: tiny models on the CPU; --json FILE; --skip sam,editors,flow,dask).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ] && ! python3 -c 'import prefect, diffusers, segment_anything' 2>/dev/null; then
  started=$(date +%s)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/pf-site .whl/*.whl
  export PYTHONPATH=/tmp/pf-site
  echo "installed $(ls .whl/*.whl | wc -l) carried wheels in $(( $(date +%s) - started )) s"
fi
# The repository root is the package `perceptforge` (pyproject.toml: package-dir): a link names it so.
mkdir -p /tmp/pf-pkg && ln -sfn "$PWD" /tmp/pf-pkg/perceptforge
export PYTHONPATH="/tmp/pf-pkg${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec python3 benchmarks/gpu_check.py "$@"
