#!/usr/bin/env bash
# The main job: set up, build, and run the default scenario.
# Prints a summary, writes out/quickstart.json and out/quickstart.png.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/tools/setup.sh"
mkdir -p "$here/out"
"$here/build/rnicsim" run "$here/scenarios/quickstart.yaml" -o "$here/out/quickstart.json" "$@"
/usr/bin/python3 "$here/tools/plot_results.py" "$here/out/quickstart.json" -o "$here/out/quickstart.png"
echo "results: out/quickstart.json   plot: out/quickstart.png"
