#!/usr/bin/env bash
# Build the double-click app: a one-folder bundle in "dist/VRAG Desktop/" (run "dist/VRAG Desktop/VRAG Desktop").
#
# From a fresh clone: sets up .venv (scripts/setup.sh: the CPU torch unless a GPU is present,
# PyInstaller from the `build` extra), builds the app's wheel (which carries the trainer's, see
# setup.py) into the work folder, then runs PyInstaller on pyinstaller.spec, which ships them in
# the bundle's _internal/wheels/ (the trainer environment is installed from them) with the uv
# binary in _internal/tools/. A bundle built from the same inputs (the app's and the trainer's
# sources, resources, the spec, this script and the installed packages) is kept: the stamp
# dist/VRAG Desktop/.vrag-build-stamp records them, and a re-run with nothing changed ends at once.
# --force rebuilds anyway.
#
# Options:   --force      rebuild even if the bundle is up to date
#            --check      exit 0 if the bundle is up to date, 1 if it would be rebuilt (builds nothing)
#            --no-setup   do not run scripts/setup.sh first (the caller just did)
#            --deb        also make dist/vrag-desktop_<version>_amd64.deb (scripts/make-installers.sh)
#            --appimage   also make dist/VRAG_Desktop-<version>-x86_64.AppImage (scripts/make-installers.sh)
# One build at a time: a second run waits for the first (a lock in the work folder), then finds the
# bundle up to date. scripts/test.sh starts a build in the background this way while the checks and
# the other tests run, and the frozen test's own call waits for it.
# Variables: VRAG_BUNDLE_CUDA=1  the CUDA variant (run on a machine whose .venv has the CUDA torch:
#                                setup.sh with a GPU or VRAG_GPU=1); see docs/install.md
#            VRAG_BUILD_DIST / VRAG_BUILD_WORK  output and work folders (default dist/, build/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# What differs by system (the Python path, checksums, the build lock, the Linux installers).
source scripts/build-platform.sh
APP="VRAG Desktop"
DIST=${VRAG_BUILD_DIST:-$ROOT/dist}
WORK=${VRAG_BUILD_WORK:-$ROOT/build}
BUNDLE="$DIST/$APP"
STAMP="$BUNDLE/.vrag-build-stamp"

force=0
check=0
installers=()
setup=1
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --check) check=1 ;;
    --no-setup) setup=0 ;;
    --deb|--appimage) installers+=("$arg") ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "build-app.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

installers_allowed || exit 2
if [ "$check" = 0 ]; then
  mkdir -p "$WORK"
  build_lock
  [ "$setup" = 0 ] || bash scripts/setup.sh >&2
fi
if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
  echo "build-app.sh: PyInstaller is not installed in .venv (scripts/setup.sh installs the 'build' extra)." >&2
  exit 1
fi
if ! "$PY" -c 'import uv, os, sys; sys.exit(not os.access(uv.find_uv_bin(), os.X_OK))' 2>/dev/null; then
  echo "build-app.sh: uv is not installed in .venv (a dependency of the app: run scripts/setup.sh); the bundle ships its binary." >&2
  exit 1
fi

# The inputs' fingerprint: tracked and untracked source files (not ignored ones), the installed
# distributions and their versions, and the build settings.
inputs_key() {
  {
    # shellcheck disable=SC2046  # the wheel's sources (scripts/wheel_sources.py): no spaces in them
    git ls-files -z --cached --others --exclude-standard -- pyinstaller.spec scripts/build-app.sh \
        scripts/wheel_sources.py $("$PY" scripts/wheel_sources.py --list) 2>/dev/null \
      | sort -z | xargs -0 "${SHA256[@]}" 2>/dev/null
    "$PY" -c 'import importlib.metadata as m; print(*sorted("%s==%s" % (d.metadata["Name"], d.version) for d in m.distributions()))'
    echo "cuda=${VRAG_BUNDLE_CUDA:-0} python=$("$PY" -V 2>&1)"
  } | "${SHA256[@]}" | cut -c1-32
}
key=$(inputs_key)

if [ "$force" = 0 ] && [ -f "$STAMP" ] && [ -x "$BUNDLE/$APP" ] && [ "$(head -n1 "$STAMP")" = "$key" ]; then
  [ "$check" = 1 ] || echo "The bundle is up to date: $BUNDLE"
  [ "$check" = 1 ] || [ ${#installers[@]} = 0 ] || bash scripts/make-installers.sh "${installers[@]}"
  exit 0
fi
[ "$check" = 0 ] || exit 1

echo "Building $BUNDLE (PyInstaller; a few minutes)…"
start=$(date +%s)
rm -rf "$BUNDLE"
mkdir -p "$WORK"
log="$WORK/pyinstaller.log"

# The wheels the bundle ships (pyinstaller.spec reads $VRAG_BUILD_WHEELS): the app's, built from a
# copy of its sources (so the build leaves no build/ or *.egg-info in the checkout), and the
# trainer's, which setup.py builds into the app's wheel (vrag_desktop/_bundled/): taken from there,
# so one place builds it.
wheels="$WORK/wheels"
src="$WORK/wheel-src"
rm -rf "$wheels" "$src"
mkdir -p "$wheels"
"$PY" scripts/wheel_sources.py "$src"  # with the licence files: the wheel's dist-info/licenses/
if ! "$PY" -m pip wheel --no-deps --no-build-isolation -q -w "$wheels" "$src" > "$WORK/wheel-app.log" 2>&1; then
  tail -n 30 "$WORK/wheel-app.log" >&2
  echo "build-app.sh: could not build the app's wheel (log: $WORK/wheel-app.log)." >&2
  exit 1
fi
rm -rf "$src"
if ! "$PY" - "$wheels" <<'PYTRAINER'
import sys, zipfile
from pathlib import Path
wheels = Path(sys.argv[1])
(app,) = wheels.glob("vrag_desktop-*.whl")
with zipfile.ZipFile(app) as z:
    (inner,) = [n for n in z.namelist() if n.startswith("vrag_desktop/_bundled/vrag_desktop_trainer-")]
    (wheels / Path(inner).name).write_bytes(z.read(inner))
PYTRAINER
then
  echo "build-app.sh: the app's wheel carries no trainer wheel (setup.py builds it from trainer/)." >&2
  exit 1
fi
export VRAG_BUILD_WHEELS="$wheels"

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
[ ${#installers[@]} = 0 ] || bash scripts/make-installers.sh "${installers[@]}"
