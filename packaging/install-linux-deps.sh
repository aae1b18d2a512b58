#!/usr/bin/env bash
# System libraries the Qt window needs on Debian/Ubuntu, and Xvfb for headless screenshots.
# Installs only what is missing, so it is a no-op on a machine that has them.
set -euo pipefail
packages=(libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 xvfb)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
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
