"""The stage kit: what an asset declares itself with (Stage, stage_asset), its resources, checks, progress, timings
and the graph's shape. Below the assets: nothing here imports an asset or the composition above them (pipelines/),
statically or by name at run time (tests/test_import_layers.py)."""
