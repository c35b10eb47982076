# shellcheck shell=bash
# Make a browser available to tests/test_browser.py (marker `browser`).
#
#   source .ci/browser.sh      # exports MAGNET_BROWSER=/usr/bin/chromium
#
# Installs Debian's `chromium` when it is missing (needs root and apt). The Python side,
# the `playwright` package, comes from requirements-dev.txt; Playwright's own browser download
# (`playwright install`) is never used: the test launches this binary via executable_path.
# With CI=true the browser test fails (instead of skipping) when either is missing.
# Sourced, so it never calls `exit`; on failure it prints why and returns non-zero.

_magnet_browser_setup() {
    local bin="${MAGNET_BROWSER:-/usr/bin/chromium}"
    if [ ! -x "$bin" ]; then
        echo "browser.sh: installing Debian package chromium" >&2
        if [ "$(id -u)" != 0 ]; then
            echo "browser.sh: chromium is missing and installing it needs root" >&2
            return 1
        fi
        apt-get update -qq >&2 || return 1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium fonts-dejavu-core >&2 || return 1
        bin=/usr/bin/chromium
    fi
    "$bin" --version >&2 || return 1
    export MAGNET_BROWSER="$bin"
}

_magnet_browser_setup
