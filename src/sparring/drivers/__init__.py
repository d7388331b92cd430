"""Method drivers: one ``run`` per stage that measures what it trains (RL-ADA's bootstrap with DA0's and DA1's
validation, a co-evolution cycle, TRACER stage 2 with both simulators' fidelity, Co-RL with the cohort's accuracy
before and after, the held-out evaluation). The one layer above ``train/`` and ``evaluate/`` where such a
measurement may live; no Dagster, no MLflow: an asset loads inputs, calls ``run`` and records what it returns, and
a benchmark calls the same function."""
