"""The pipeline's shape as params.yaml makes it, read once here by both Dagster's assets and dvc.yaml's rendering
(which renders those assets' declarations): how many cycle stages there are and whether the stages that play the
simulator wait for `simulator_rl`. Every profile is read, so the graph is one whatever the active profile."""

from __future__ import annotations

from pathlib import Path

from sparring.params import PROFILES, load_params, some_profile_plays_rl_simulator

PARAMS_FILE = Path(__file__).resolve().parents[1] / "params.yaml"


def n_cycles(params_file: Path = PARAMS_FILE) -> int:
    """The number of cycle stages: the largest `coevolution.max_cycles` of any profile (a profile with fewer
    records in the rest that it stopped)."""
    return max(load_params(params_file, name).coevolution.max_cycles for name in PROFILES)


def cycle_name(k: int) -> str:
    return f"cycle_{k}"


N_CYCLES = n_cycles()
LAST_CYCLE = cycle_name(N_CYCLES)  # the final agent's stage: peer_rl and evaluate read it
# agent_rl and cycle_1 wait for simulator_rl only when some profile plays the RL simulator (`coevolution.simulator`).
PLAYS_RL_SIMULATOR = some_profile_plays_rl_simulator(PARAMS_FILE)
