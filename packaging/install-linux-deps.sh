#!/usr/bin/env bash
# The Debian/Ubuntu packages Distloop needs, installed only where missing; silent when none is.
#   bash packaging/install-linux-deps.sh app    what the window needs
#   bash packaging/install-linux-deps.sh test   that, and the tools and daemons the tests use
#   bash packaging/install-linux-deps.sh venv   python3-venv, without which Debian's python3
#                                               makes no virtual environment (packaging/setup.sh)
#
# The app's list is every library that PySide6's Qt libraries (Core, Gui, Widgets, Svg, DBus,
# XcbQpa) and its X11 platform plugin (plugins/platforms/libqxcb.so, plugins/xcbglintegrations)
# link, from `readelf -d` on the wheel, less glibc's and what the wheel bundles (ICU).
# Qt 6.5+ loads the xcb plugin only with every xcb library below; the offscreen platform the
# GUI tests use needs none of them.
#
# An entry `old|new` is one package under two names: Debian 13 and Ubuntu 24.04 renamed it in
# the 64-bit time_t transition. There the old name is only a virtual package, which dpkg-query
# reports as not installed, so each name is checked as a real package and the one the
# system's apt knows is installed.
set -euo pipefail

app=(
  libglib2.0-0\|libglib2.0-0t64 zlib1g libzstd1                       # QtCore
  libgl1 libegl1 libfontconfig1 libfreetype6 libx11-6 libxkbcommon0   # QtGui
  libdbus-1-3                                                         # QtDBus
  libxcb1 libx11-xcb1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 # the xcb plugin
  libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render0 libxcb-render-util0
  libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xkb1
  libxcb-glx0                                                         # its OpenGL (GLX)
)
tests=(
  xvfb xauth x11-utils xdotool imagemagick  # the real window on Xvfb: xvfb-run, xwininfo, import
  iproute2                                  # local clusters in network namespaces (ip netns)
  debootstrap                               # fresh Debian roots (test_fresh_system, test_packaging)
  lintian desktop-file-utils                # the .deb's checks (tests/packaging/test_packaging.py)
  elfutils patchelf                         # its build: eu-strip, RUNPATHs dropped
  openssh-server openssh-client slurm-wlm munge  # the cluster launchers' tests
  iptables                                  # a firewalled port for the pre-flight test
)

case "${1:-}" in
  app) wanted=("${app[@]}") ;;
  test) wanted=("${app[@]}" "${tests[@]}") ;;
  venv) wanted=(python3-venv) ;;
  *) echo "usage: bash packaging/install-linux-deps.sh app|test|venv" >&2; exit 2 ;;
esac

installed() {  # any of the entry's names is installed (not `dpkg -s`: it also succeeds for a
  local name   # removed package whose configuration files remain)
  for name in ${1//|/ }; do
    [ "$(dpkg-query -W -f '${Status}' "$name" 2>/dev/null)" = "install ok installed" ] && return 0
  done
  return 1
}

missing=()
for entry in "${wanted[@]}"; do
  installed "$entry" || missing+=("$entry")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "distloop: please install these system packages (Debian names): ${missing[*]}" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "distloop: installing ${missing[*]} needs root: run this as root, or install sudo" >&2
    exit 1
  fi
  sudo="sudo"
fi
$sudo apt-get update -qq
packages=()
for entry in "${missing[@]}"; do
  for name in ${entry//|/ }; do  # the name this system's apt has a real package for
    if [[ "$(apt-cache policy "$name" 2>/dev/null)" == *"Candidate: "[^\(]* ]]; then
      packages+=("$name")
      continue 2
    fi
  done
  echo "distloop: no package ${entry//|/ or } in this system's apt sources" >&2
  exit 1
done
echo "distloop: installing ${packages[*]}" >&2
$sudo env DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes \
  apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
