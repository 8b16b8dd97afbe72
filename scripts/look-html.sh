#!/usr/bin/env bash
# look-html.sh renders an HTML page (such as a kvq report) to a PNG with
# headless Chromium, so a person or a check can look at it.
#
#   scripts/look-html.sh FILE.html OUT.png [WIDTHxHEIGHT]
#
# Needs Debian's chromium package (apt-get install -y chromium); no test
# depends on it. The page is opened from disk with the network off.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: $0 FILE.html OUT.png [WIDTHxHEIGHT]" >&2
	exit 2
fi
in=$1 out=$2 size=${3:-1200x2000}
[ -f "$in" ] || { echo "$0: $in: no such file" >&2; exit 1; }

browser=
for b in chromium chromium-headless-shell chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
[ -n "$browser" ] || { echo "$0: no Chromium found (apt-get install -y chromium)" >&2; exit 1; }

mkdir -p "$(dirname "$out")"
abs_out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# Open a copy named .html, so Chromium reads it as HTML whatever the name
# (a golden file ends in .golden); the page is self-contained.
page=$profile/page.html
cp "$in" "$page"

# --no-sandbox: Chromium refuses to run as root with its sandbox on, and
# these machines run as root. The proxy flags keep it off the network.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--user-data-dir="$profile" --no-first-run --disable-extensions \
	--proxy-server="127.0.0.1:9" --proxy-bypass-list="<-loopback>" \
	--window-size="${size/x/,}" --screenshot="$abs_out" "file://$page" \
	>/dev/null 2>"$profile/stderr" || { cat "$profile/stderr" >&2; exit 1; }
[ -s "$abs_out" ] || { cat "$profile/stderr" >&2; echo "$0: no screenshot written" >&2; exit 1; }
echo "$abs_out"
