#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages tcq builds and tests with (README's first command runs it).
# Uses sudo only when not root, so it also works as root on a machine without sudo.
#   --ci   also the fuzzers' compiler and runtime (clang, libclang-rt-14-dev) and chromium
set -euo pipefail

pkgs="build-essential cmake pkg-config libjansson-dev libpcre2-dev libutf8proc-dev libopenblas-dev
      libedit-dev libmicrohttpd-dev nodejs npm"
pkgs=$(echo $pkgs)
for a in "$@"; do
  case $a in
    --ci) pkgs="$pkgs clang libclang-rt-14-dev chromium" ;;   # chromium: tcq serve's chat page test
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$a' (only --ci)" >&2; exit 2 ;;
  esac
done

# NodeSource's nodejs package ships npm and conflicts with Debian's npm: ask for npm only when
# no npm is installed.
if command -v npm >/dev/null 2>&1; then pkgs=${pkgs/ npm/}; fi

# Already there: nothing to do (no root needed).
if dpkg -s $pkgs >/dev/null 2>&1; then
  echo "install-deps.sh: all packages present"
  exit 0
fi
sudo_=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps.sh: not root and no sudo: install as root: apt-get install $pkgs" >&2; exit 1; }
  sudo_="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo_ apt-get update -qq || true
$sudo_ apt-get install -y -qq --no-install-recommends $pkgs
