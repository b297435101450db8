#!/usr/bin/env bash
# Build the double-click app: a one-folder bundle in "dist/VRAG Desktop/" (run "dist/VRAG Desktop/VRAG Desktop").
#
# From a fresh clone: sets up .venv (scripts/setup.sh: the CPU torch unless a GPU is present,
# PyInstaller from the `build` extra), then runs PyInstaller on pyinstaller.spec. A bundle built
# from the same inputs (the app's sources, resources, the spec, this script and the installed
# packages) is kept: the stamp dist/VRAG Desktop/.vrag-build-stamp records them, and a re-run with
# nothing changed ends at once. --force rebuilds anyway.
#
# Options:   --force      rebuild even if the bundle is up to date
#            --check      exit 0 if the bundle is up to date, 1 if it would be rebuilt (builds nothing)
#            --no-setup   do not run scripts/setup.sh first (the caller just did)
# One build at a time: a second run waits for the first (a lock in the work folder), then finds the
# bundle up to date. scripts/test.sh starts a build in the background this way while the checks and
# the other tests run, and the frozen test's own call waits for it.
# Variables: VRAG_BUNDLE_CUDA=1  the CUDA variant (run on a machine whose .venv has the CUDA torch:
#                                setup.sh with a GPU or VRAG_GPU=1); see docs/install.md
#            VRAG_BUILD_DIST / VRAG_BUILD_WORK  output and work folders (default dist/, build/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
APP="VRAG Desktop"
DIST=${VRAG_BUILD_DIST:-$ROOT/dist}
WORK=${VRAG_BUILD_WORK:-$ROOT/build}
BUNDLE="$DIST/$APP"
STAMP="$BUNDLE/.vrag-build-stamp"

force=0
check=0
setup=1
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --check) check=1 ;;
    --no-setup) setup=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "build-app.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

if [ "$check" = 0 ]; then
  mkdir -p "$WORK"
  exec 9>"$WORK/.build-app.lock"
  if ! flock -n 9; then
    echo "build-app.sh: another build is running; waiting for it…" >&2
    flock 9
  fi
  [ "$setup" = 0 ] || bash scripts/setup.sh >&2
fi
PY=.venv/bin/python
if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
  echo "build-app.sh: PyInstaller is not installed in .venv (scripts/setup.sh installs the 'build' extra)." >&2
  exit 1
fi

# The inputs' fingerprint: tracked and untracked source files (not ignored ones), the installed
# distributions and their versions, and the build settings.
inputs_key() {
  {
    git ls-files -z --cached --others --exclude-standard -- vrag_desktop resources pyinstaller.spec \
        scripts/build-app.sh pyproject.toml setup.py 2>/dev/null \
      | sort -z | xargs -0 sha256sum 2>/dev/null
    "$PY" -c 'import importlib.metadata as m; print(*sorted("%s==%s" % (d.metadata["Name"], d.version) for d in m.distributions()))'
    echo "cuda=${VRAG_BUNDLE_CUDA:-0} python=$("$PY" -V 2>&1)"
  } | sha256sum | cut -c1-32
}
key=$(inputs_key)

if [ "$force" = 0 ] && [ -f "$STAMP" ] && [ -x "$BUNDLE/$APP" ] && [ "$(head -n1 "$STAMP")" = "$key" ]; then
  [ "$check" = 1 ] || echo "The bundle is up to date: $BUNDLE"
  exit 0
fi
[ "$check" = 0 ] || exit 1

echo "Building $BUNDLE (PyInstaller; a few minutes)…"
start=$(date +%s)
rm -rf "$BUNDLE"
mkdir -p "$WORK"
log="$WORK/pyinstaller.log"
if ! "$PY" -m PyInstaller --noconfirm --clean --log-level INFO \
    --distpath "$DIST" --workpath "$WORK" pyinstaller.spec > "$log" 2>&1; then
  grep -v "DeprecationWarning\|__import__" "$log" | tail -n 40 >&2
  echo "build-app.sh: PyInstaller failed (whole log: $log)." >&2
  exit 1
fi
seconds=$(( $(date +%s) - start ))
size=$(du -sm "$BUNDLE" | cut -f1)
printf '%s\nbuilt %s in %d s, %d MB\n' "$key" "$(date -u +%FT%TZ)" "$seconds" "$size" > "$STAMP"
echo "Built in ${seconds} s: $BUNDLE (${size} MB). Run: \"$BUNDLE/$APP\""
