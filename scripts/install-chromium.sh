#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test
# (node/dashboard_browser_test.go) when no chromium is on PATH. The test
# skips without it; CI (.ci/run) calls this first. Needs root (or sudo)
# and access to the Debian archive; on failure it warns and exits 0 so
# CI still runs the rest (the test then skips and says so).
set -uo pipefail

for b in chromium chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "install-chromium: $b already installed ($(command -v "$b"))"
		exit 0
	fi
done

SUDO=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
		echo "install-chromium: not root and no sudo: the browser test will skip" >&2
		exit 0
	fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: no apt-get (not Debian?): the browser test will skip" >&2
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
	echo "install-chromium: apt-get install chromium failed: the browser test will skip" >&2
	exit 0
fi
echo "install-chromium: installed $(command -v chromium) in $(( $(date +%s) - start ))s"
