"""Benchmarks: each script prints its figures and, last, one JSON line (`python benchmarks/<name>.py --help`).
Shared helpers are modules of their own here (run_folders, banking77_split), imported as `benchmarks.<module>`."""
