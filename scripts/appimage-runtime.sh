#!/usr/bin/env bash
# Build the AppImage type 2 runtime (the ELF program a type 2 AppImage starts with; the squashfs
# image is appended to it) from packaging/appimage-runtime/ (AppImage's type2-runtime, MIT: see the
# README there), statically linked with gcc against Debian's static libraries: libfuse3,
# squashfuse and its decompressors (zstd, zlib, xz, lz4, lzo) and glibc. No registry this project
# may use ships the runtime itself, so scripts/make-installers.sh --appimage builds it with this.
#
#   scripts/appimage-runtime.sh [OUT]     (default: build/appimage-runtime/runtime-x86_64)
#   scripts/appimage-runtime.sh --install-deps    apt-get install what it and mksquashfs need (sudo)
#
# Prints OUT's path. Beside it, licences/ holds the licence texts of what the runtime contains
# (make-installers.sh puts them in the AppImage). A runtime built from the same sources and the same
# compiler and library versions (OUT.key) is kept. Needs (Debian/Ubuntu):
#   apt-get install gcc libc6-dev libfuse3-dev libsquashfuse-dev libzstd-dev zlib1g-dev liblzma-dev liblz4-dev liblzo2-dev
# (squashfuse >= 0.1.101 for sqfs_ll_open's offset; built and tested with Debian 12's 0.1.105).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SRC="$ROOT/packaging/appimage-runtime"
WORK=${VRAG_BUILD_WORK:-$ROOT/build}
PACKAGES="gcc libc6-dev libfuse3-dev libsquashfuse-dev libzstd-dev zlib1g-dev liblzma-dev liblz4-dev liblzo2-dev"
if [ "${1:-}" = --install-deps ]; then
  command -v apt-get >/dev/null || { echo "appimage-runtime.sh: no apt-get; install: $PACKAGES squashfs-tools" >&2; exit 1; }
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  # shellcheck disable=SC2086  # the package names, one word each
  "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq $PACKAGES squashfs-tools >/dev/null
  exit 0
fi
OUT=${1:-$WORK/appimage-runtime/runtime-x86_64}
# Debian packages whose code is linked in (their copyright files go into licences/).
LINKED="libc6 libfuse3-3 libsquashfuse0 libzstd1 zlib1g liblzma5 liblz4-1 liblzo2-2"
LIBS=(squashfuse_ll squashfuse fuse3 zstd z lzma lz4 lzo2)
UPSTREAM=caf24f9  # AppImage/type2-runtime's commit runtime.c was taken from

fail() {
  echo "appimage-runtime.sh: $*" >&2
  exit 1
}

case "$(uname -m)" in
  x86_64) ;;
  *) fail "only x86_64 is built here (this machine: $(uname -m))." ;;
esac
missing=()
command -v gcc >/dev/null || fail "gcc is not installed (Debian/Ubuntu: apt-get install $PACKAGES; or run $0 --install-deps)."
for lib in "${LIBS[@]}"; do
  [ "$(gcc -print-file-name="lib$lib.a")" != "lib$lib.a" ] || missing+=("lib$lib.a")
done
for header in squashfuse/ll.h fuse3/fuse_lowlevel.h; do
  printf '#define FUSE_USE_VERSION 32\n#include <%s>\n' "$header" \
    | gcc -E -I/usr/include/squashfuse -x c - >/dev/null 2>&1 || missing+=("$header")
done
[ ${#missing[@]} = 0 ] \
  || fail "the static libraries and headers it links are missing (${missing[*]}); Debian/Ubuntu: apt-get install $PACKAGES (or run $0 --install-deps)"

# The fingerprint: the sources, the compiler, and the linked libraries' versions.
key=$(
  {
    sha256sum "$SRC/runtime.c" "$SRC/data_sections.ld" "$SRC/squashfuse/fuseprivate.h" "$0" | cut -c1-64
    gcc --version | head -n1
    for lib in "${LIBS[@]}"; do sha256sum "$(gcc -print-file-name="lib$lib.a")" | cut -c1-64; done
  } | sha256sum | cut -c1-32
)
if [ -x "$OUT" ] && [ -f "$OUT.key" ] && [ "$(cat "$OUT.key")" = "$key" ]; then
  echo "$OUT"
  exit 0
fi

echo "Building the AppImage runtime (gcc, static)…" >&2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vrag-appimage-runtime.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# As upstream's Makefile, but gcc and glibc (upstream: clang, musl, mimalloc) and squashfuse 0.1.x's
# private header vendored (squashfuse/fuseprivate.h). -T: the .appimage magic and the sections
# (digest, update information, signature) AppImage's tools fill in later.
if ! (cd "$SRC" && gcc -std=gnu99 -Os -D_FILE_OFFSET_BITS=64 -DGIT_COMMIT="\"$UPSTREAM-vrag\"" \
    -I. -I/usr/include/squashfuse -I/usr/include/fuse3 -T data_sections.ld \
    -ffunction-sections -fdata-sections -Wl,--gc-sections -static -Wall -Wno-format-overflow \
    -ffile-prefix-map="$SRC"=. runtime.c "${LIBS[@]/#/-l}" -lpthread -o "$tmp/runtime") \
    > "$tmp/gcc.log" 2>&1; then
  cat "$tmp/gcc.log" >&2
  fail "gcc failed to build the runtime (Debian/Ubuntu: apt-get install $PACKAGES)."
fi
strip --strip-debug --strip-unneeded "$tmp/runtime"
# The type 2 magic at offset 8 of the ELF header ("AI", 2): after strip, which would rewrite it.
printf 'AI\002' | dd of="$tmp/runtime" bs=1 count=3 seek=8 conv=notrunc status=none
version=$("$tmp/runtime" --appimage-version 2>&1) || fail "the built runtime does not run: $version"
case "$version" in
  *"$UPSTREAM-vrag"*) ;;
  *) fail "the built runtime says '$version', not its version $UPSTREAM-vrag." ;;
esac

# The licences of what it contains: the runtime's own (MIT), squashfuse's private header (BSD-2)
# and each linked library's Debian copyright file.
lic="$tmp/licences"
mkdir -p "$lic/squashfuse-header"
cp "$SRC/LICENSE" "$lic/appimage-type2-runtime.LICENSE"
cp "$SRC/squashfuse/LICENSE" "$lic/squashfuse-header/LICENSE"
for pkg in $LINKED; do
  if [ -f "/usr/share/doc/$pkg/copyright" ]; then
    cp "/usr/share/doc/$pkg/copyright" "$lic/$pkg.copyright"
  else
    echo "appimage-runtime.sh: warning: /usr/share/doc/$pkg/copyright not found (not a Debian system?)" >&2
  fi
done

# The full texts those copyright files refer to in /usr/share/common-licenses (glibc and libfuse:
# LGPL-2.1; lzo: GPL-2).
for text in LGPL-2.1 GPL-2; do
  [ ! -f "/usr/share/common-licenses/$text" ] || cp "/usr/share/common-licenses/$text" "$lic/$text.txt"
done

mkdir -p "$(dirname "$OUT")"
rm -rf "$(dirname "$OUT")/licences"
mv "$lic" "$(dirname "$OUT")/licences"
mv "$tmp/runtime" "$OUT"
echo "$key" > "$OUT.key"
echo "Built $OUT ($(du -k "$OUT" | cut -f1) kB): $version" >&2
echo "$OUT"
