#!/usr/bin/env bash
# Makes the Python virtual environment DIR with PACKAGES from PyPI, unless it already imports
# every one of MODULES (comma-separated), so a second run downloads nothing; an existing
# environment that lacks some gets them added (pip keeps what is there). Prints the
# interpreter's path. Used by scripts/python-venv.sh and scripts/serve-venv.sh.
#
#   scripts/venv.sh DIR MODULES PACKAGE...
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
venv=$1
modules=$2
shift 2
if ! "$venv/bin/python" -c "import $modules" 2>/dev/null; then
  if ! "$venv/bin/python" -c "" 2>/dev/null; then
    rm -rf "$venv"
    "$py" -m venv "$venv"
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"
fi
echo "$venv/bin/python"
