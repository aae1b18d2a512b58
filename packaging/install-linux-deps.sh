#!/usr/bin/env bash
# System libraries the Qt window needs on Debian/Ubuntu, Xvfb for headless screenshots, and
# xwininfo (x11-utils), with which tests/gui/test_real_window.py sees the window on Xvfb.
# Qt 6.5+ loads its X11 (xcb) platform plugin only with every xcb library below; the
# offscreen platform the other GUI tests use needs none of them.
# Installs only what is missing, so it is a no-op on a machine that has them.
set -euo pipefail
packages=(
  libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3
  libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libxcb-image0
  libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxcb-util1
  xvfb x11-utils
)
missing=()
for package in "${packages[@]}"; do
  # Not `dpkg -s`: it also succeeds for a removed package whose configuration files remain.
  status=$(dpkg-query -W -f '${Status}' "$package" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "distloop: please install these system packages: ${missing[*]}" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
