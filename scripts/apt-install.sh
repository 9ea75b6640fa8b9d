#!/usr/bin/env bash
# Install the given Debian/Ubuntu packages that are not installed yet (sudo unless root).
# Shared by install.sh and benchmarks/setup_peers.sh.
set -euo pipefail
missing=""
for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -n "$missing" ] || exit 0
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# shellcheck disable=SC2086  # one word per package
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing \
  >/dev/null
