"""Method drivers: one ``run`` per stage that measures a method before and after it trains (TRACER stage 2 with
both simulators' fidelity, Co-RL with the cohort's accuracy). The one layer above ``train/`` and ``evaluate/`` where
such a measurement may live; no Dagster, no MLflow: an asset loads inputs, calls ``run`` and records what it returns,
and a benchmark calls the same function."""
