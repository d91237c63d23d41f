#!/bin/bash
# The same one-at-a-time user runs as round 17's: run here as
#   run.sh benchmarks/results/survival-1.45GB-2026-11-28 3 1450000000:1696 1450000000:1888
exec bash "$(dirname "$0")/../search-2026-11-28k/alone/run.sh" "$@"
