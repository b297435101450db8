# Sourced by scripts/build-app.sh: what differs by system, in one place, so a Windows or macOS port
# starts here (docs/install.md, "Building on Windows or macOS"). Linux is what is built and tested;
# the other branches are what such a port starts from. Sets OS, PY (the .venv's Python) and SHA256
# (a checksum command); defines build_lock (one build at a time in $WORK) and installers_allowed
# (the AppImage and .deb of $installers only on Linux).
# shellcheck shell=bash
OS=$(uname -s)
case "$OS" in
  MINGW*|MSYS*|CYGWIN*) PY=.venv/Scripts/python.exe ;;  # Git Bash / MSYS2 on Windows
  *) PY=.venv/bin/python ;;
esac
if command -v sha256sum >/dev/null 2>&1; then SHA256=(sha256sum); else SHA256=(shasum -a 256); fi  # GNU or macOS
build_lock() {  # one build at a time: flock (util-linux), else a lock folder (macOS, Git Bash)
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$WORK/.build-app.lock"
    if ! flock -n 9; then
      echo "build-app.sh: another build is running; waiting for it…" >&2
      flock 9
    fi
    return
  fi
  local lock="$WORK/.build-app.lock.d" said=0 holder
  until mkdir "$lock" 2>/dev/null; do
    holder=$(cat "$lock/pid" 2>/dev/null || true)
    if [ -n "$holder" ] && ! kill -0 "$holder" 2>/dev/null; then  # its build was killed
      rm -rf "$lock"
      continue
    fi
    [ "$said" = 1 ] || echo "build-app.sh: another build is running ($lock); waiting for it…" >&2
    said=1
    sleep 2
  done
  echo $$ > "$lock/pid"
  trap "rm -rf $(printf %q "$lock")" EXIT
}
installers_allowed() {  # the AppImage and the .deb are Linux packages (scripts/make-installers.sh)
  if [ ${#installers[@]} = 0 ] || [ "$OS" = Linux ]; then return 0; fi
  echo "build-app.sh: ${installers[*]} make Linux installers; this is $OS (docs/install.md says what a $OS build needs)." >&2
  return 1
}
