#!/usr/bin/env bash
# Linux installers made from the built bundle (dist/VRAG Desktop/): scripts/build-app.sh --deb
# --appimage runs this after the build. Linux-only, kept apart from the bundle's build. Hard links
# stage the bundle: run it while nothing else links or rebuilds dist/ (tar sees link counts change).
#
#   --deb        dist/vrag-desktop_<version>_amd64.deb: the bundle in /opt/vrag-desktop, the command
#                /usr/bin/vrag-desktop, the menu entry and icons in /usr/share (dpkg-deb)
#   --appimage   dist/VRAG_Desktop-<version>-x86_64.AppImage: an AppDir (the bundle in
#                usr/lib/vrag-desktop, AppRun, the entry and icon, the runtime's licences in
#                usr/share/doc/vrag-desktop/appimage-runtime/) packed with mksquashfs (Debian:
#                squashfs-tools), appended to the AppImage type 2 runtime: an ELF program that mounts
#                the image (FUSE) or extracts it (--appimage-extract, APPIMAGE_EXTRACT_AND_RUN=1).
#                No registry this project may use ships the runtime: scripts/appimage-runtime.sh
#                builds it from packaging/appimage-runtime/ (gcc and Debian's static libraries; it
#                names the packages when they are missing). VRAG_APPIMAGE_RUNTIME=FILE uses FILE
#                instead (e.g. AppImage's released runtime-x86_64).
# The menu entry and icons come from vrag_desktop/core/desktop_entry.py (the app's own
# --install-desktop writes the same entry). An installer newer than the bundle's stamp is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
APP="VRAG Desktop"
ID=vrag-desktop
DIST=${VRAG_BUILD_DIST:-$ROOT/dist}
WORK=${VRAG_BUILD_WORK:-$ROOT/build}
BUNDLE="$DIST/$APP"
STAMP="$BUNDLE/.vrag-build-stamp"
PY=${VRAG_BUILD_PYTHON:-.venv/bin/python}

deb=0
appimage=0
for arg in "$@"; do
  case "$arg" in
    --deb) deb=1 ;;
    --appimage) appimage=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "make-installers.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
if [ ! -x "$BUNDLE/$APP" ] || [ ! -f "$STAMP" ]; then
  echo "make-installers.sh: no built bundle in $BUNDLE (run scripts/build-app.sh first)." >&2
  exit 1
fi
version=$("$PY" -c 'from vrag_desktop._version import __version__ as v; print(v)')
# Debian orders 1.0~rc1 before 1.0; PEP 440's pre-releases and .devN map onto ~.
debversion=$(printf '%s' "$version" | sed -E 's/\.?(a|b|rc|dev)([0-9]*)/~\1\2/')

# Is $1 newer than the bundle? Then it was made from this bundle and is kept.
fresh() { [ -f "$1" ] && [ "$1" -nt "$STAMP" ]; }

# The menu entry (running `$1`) and the icons, into a share/ folder $2.
entry_and_icons() {
  mkdir -p "$2/applications" "$2/icons/hicolor"
  "$PY" -m vrag_desktop.core.desktop_entry --exec "$1" --entry "$2/applications/$ID.desktop" \
    --icons "$2/icons/hicolor"
}

# The bundle's files, hard-linked (no 1.5 GB copy), without the build stamp.
stage_bundle() {
  rm -rf "$1"
  mkdir -p "$(dirname "$1")"
  cp -al "$BUNDLE" "$1" 2>/dev/null || cp -a "$BUNDLE" "$1"
  rm -f "$1/.vrag-build-stamp"
}

if [ "$deb" = 1 ]; then
  out="$DIST/${ID}_${debversion}_amd64.deb"
  if fresh "$out"; then
    echo "The .deb is up to date: $out"
  else
    command -v dpkg-deb >/dev/null || { echo "make-installers.sh: dpkg-deb is not installed (Debian: dpkg)." >&2; exit 1; }
    root="$WORK/deb-root"
    stage_bundle "$root/opt/$ID"
    mkdir -p "$root/usr/bin" "$root/usr/share/doc/$ID" "$root/DEBIAN"
    ln -s "../../opt/$ID/$APP" "$root/usr/bin/$ID"
    entry_and_icons "$ID" "$root/usr/share"
    cp LICENSE "$root/usr/share/doc/$ID/copyright"
    for f in NOTICE THIRD_PARTY_NOTICES.md; do
      [ ! -f "$f" ] || cp "$f" "$root/usr/share/doc/$ID/"
    done
    size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
    # Depends: what the bundle takes from the machine (docs/install.md, "Supported distributions").
    cat > "$root/DEBIAN/control" <<EOF
Package: $ID
Version: $debversion
Architecture: amd64
Maintainer: VRAG Desktop developers <vrag-desktop@users.noreply.invalid>
Installed-Size: $size
Section: utils
Priority: optional
Depends: libc6 (>= 2.35), libstdc++6 (>= 11), libgcc-s1, libexpat1, libegl1, libgl1, libfontconfig1, libxkbcommon0, libglib2.0-0 | libglib2.0-0t64, libdbus-1-3
Recommends: libxkbcommon-x11-0, libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1
Description: Answer questions from your own documents, images and videos, offline
 VRAG Desktop indexes PDFs, images and videos on this computer and answers
 questions about them with a visual retrieval-augmented agent. The whole app
 (Python, Qt, torch CPU) lives in /opt/vrag-desktop; the command is vrag-desktop.
EOF
    echo "Making $out (dpkg-deb, zstd)…"
    rm -f "$out"  # written under another name first: a failed build leaves no .deb that looks fresh
    nice -n 10 dpkg-deb --root-owner-group -Zzstd -z3 --build "$root" "$out.part" >/dev/null
    mv "$out.part" "$out"
    rm -rf "$root"
    echo "Built $out ($(du -m "$out" | cut -f1) MB)"
  fi
fi

if [ "$appimage" = 1 ]; then
  image="$DIST/VRAG_Desktop-$version-x86_64.AppImage"
  runtime=${VRAG_APPIMAGE_RUNTIME:-}
  # A given runtime must be one: an ELF file with the type 2 magic ("AI", 2) at offset 8.
  bytes() { od -An -tx1 -j "$2" -N "$3" "$1" 2>/dev/null | tr -d ' \n'; }
  if [ -n "$runtime" ] && { [ "$(bytes "$runtime" 0 4)" != 7f454c46 ] || [ "$(bytes "$runtime" 8 3)" != 414902 ]; }; then
    echo "make-installers.sh: VRAG_APPIMAGE_RUNTIME=$runtime is not an AppImage type 2 runtime (an ELF file with the bytes 'AI' 2 at offset 8)." >&2
    exit 1
  fi
  licences=""
  if [ -z "$runtime" ]; then  # built here (seconds; kept while its sources and libraries are the same)
    runtime=$(bash scripts/appimage-runtime.sh "$WORK/appimage-runtime/runtime-x86_64")
    licences="$(dirname "$runtime")/licences"
  fi
  if fresh "$image" && [ "$image" -nt "$runtime" ]; then
    echo "The AppImage is up to date: $image"
  else
    command -v mksquashfs >/dev/null || {
      echo "make-installers.sh: mksquashfs is not installed (Debian: apt-get install squashfs-tools)." >&2
      exit 1
    }
    appdir="$WORK/AppDir"
    stage_bundle "$appdir/usr/lib/$ID"
    cat > "$appdir/AppRun" <<'EOF'
#!/bin/sh
# The AppImage's entry point: the bundle's executable (the runtime sets APPDIR; an extracted
# squashfs-root runs this file directly).
HERE=${APPDIR:-$(dirname "$(readlink -f "$0")")}
exec "$HERE/usr/lib/vrag-desktop/VRAG Desktop" "$@"
EOF
    chmod 755 "$appdir/AppRun"
    entry_and_icons "$ID" "$appdir/usr/share"
    cp "$appdir/usr/share/applications/$ID.desktop" "$appdir/$ID.desktop"
    cp "$appdir/usr/share/icons/hicolor/256x256/apps/$ID.png" "$appdir/$ID.png"
    ln -s "$ID.png" "$appdir/.DirIcon"
    if [ -n "$licences" ]; then  # what the runtime contains, and under which licences
      mkdir -p "$appdir/usr/share/doc/$ID"
      cp -r "$licences" "$appdir/usr/share/doc/$ID/appimage-runtime"
      cp packaging/appimage-runtime/README.md "$appdir/usr/share/doc/$ID/appimage-runtime/"
    fi
    squash="$WORK/appimage.squashfs"
    echo "Packing the AppDir (mksquashfs, zstd, one core; minutes)…"
    rm -f "$squash" "$image"
    nice -n 10 mksquashfs "$appdir" "$squash" -root-owned -noappend -comp zstd -processors 1 -quiet >/dev/null
    rm -rf "$appdir"
    # Written under another name first: a failed build leaves no AppImage that looks fresh.
    cat "$runtime" "$squash" > "$image.part"
    rm -f "$squash"
    chmod 755 "$image.part"
    mv "$image.part" "$image"
    echo "Built $image ($(du -m "$image" | cut -f1) MB)"
  fi
fi
