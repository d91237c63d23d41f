"""What was measured, on disk and in memory: the sweep JSONL store, bench baselines, and
runs as pandas DataFrames."""
