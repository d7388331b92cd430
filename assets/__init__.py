"""The stages' Dagster assets. Importing them binds params.yaml's `domain` for this process and the stages it starts
(sparring.runtime.bind_domain), before any of them imports the world: the CLI, `dvc repro`'s stage commands and the
Dagster UI all come through here."""

from sparring.params import ParamsError, load_params
from sparring.runtime import bind_domain, project_root

_PARAMS_FILE = project_root() / "params.yaml"
try:
    bind_domain(load_params(_PARAMS_FILE).domain, project_root())
except ParamsError:
    raise
except ValueError as exc:  # an unknown domain, or another than this process already plays: by params.yaml's key
    raise ParamsError(f"{_PARAMS_FILE}: {exc}") from None
