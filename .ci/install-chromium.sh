#!/usr/bin/env bash
# The dashboard's browser tests drive Debian's chromium through Playwright (no browser is
# downloaded by Playwright). Install it with apt-get when it is missing.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi
/usr/bin/chromium --version >&2 2>/dev/null || true
