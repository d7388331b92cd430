"""Writes that never leave a half-written output where a good one stood, and never replace what sparring did not
write: write beside, then rename.

Every folder :func:`replace_dir` writes holds a manifest, ``.sparring-output.json``, listing the files it wrote.
A later write replaces a folder only if it is sparring's own (the manifest is there and the folder holds nothing
else), is empty, or holds only names the caller ``recognizes`` as its own earlier output; anything else is refused
with :class:`OutputRefused`, naming the path, before anything is written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MANIFEST = ".sparring-output.json"
_UMASK = os.umask(0o022)  # read once (os.umask can only be read by setting it), then put back
os.umask(_UMASK)


class OutputRefused(ValueError):
    """An output path that holds something sparring did not write (or cannot hold the output); nothing was written."""


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_json(obj: dict, path: Path) -> None:
    """``obj`` as JSON at ``path``, written beside it then renamed (no temp file is left on failure)."""
    _write_file(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8"))


RESULT_PLACES = 4  # a saved result's floats: reported to 3 places, and float noise stays below the 4th


def stable_results(obj: Any) -> Any:
    """``obj`` with its floats rounded to RESULT_PLACES, lists for tuples."""
    if isinstance(obj, float):
        return round(obj, RESULT_PLACES)
    if isinstance(obj, dict):
        return {k: stable_results(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [stable_results(v) for v in obj]
    return obj


def write_results(obj: dict, path: Path) -> None:
    """A result one stage saves inside its output folder for a later one (a simulator's fidelity, the peer cohort),
    floats rounded (:func:`stable_results`) so a rerun on the same inputs writes the same bytes: MiniLM's
    embeddings differ at ~1e-8 between runs, and the stages below digest the folder (the cycles' fingerprint, DVC)."""
    write_json(stable_results(obj), path)


def write_text(text: str, path: Path) -> None:
    """``text`` (UTF-8) at ``path``, written beside it then renamed (no temp file is left on failure)."""
    _write_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_csv(frame: Any, path: Path) -> None:
    """A polars DataFrame as CSV, written beside the target then renamed (no temp file is left on failure)."""
    _write_file(path, frame.write_csv)


def _write_file(path: Path, fill: Callable[[Path], Any]) -> None:
    path = Path(path)
    if path.is_dir():
        raise OutputRefused(f"{path}: is a folder; name the file to write")
    tmp = _tmp_sibling(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fill(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputRefused(f"{path}: cannot write the output: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _listing(folder: Path) -> list[str]:
    """Every file under ``folder``, relative, sorted (folders are implied by their files)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def _foreign(folder: Path, recognizes: Iterable[str] = ()) -> list[str]:
    """The files under ``folder`` sparring did not write: not in its manifest, or (a folder from before manifests)
    not among the names in ``recognizes``; every file if neither vouches for the folder."""
    files = [f for f in _listing(folder) if f != MANIFEST]
    manifest = folder / MANIFEST
    if manifest.is_file():
        try:
            listed = set(json.loads(manifest.read_text(encoding="utf-8")).get("files", []))
        except (ValueError, AttributeError):
            listed = set()
        return [f for f in files if f not in listed]
    known = set(recognizes)
    return [f for f in files if f not in known] if known and set(files) <= known else files


def is_own_output(folder: Path, recognizes: Iterable[str] = ()) -> bool:
    """Whether replacing ``folder`` loses nothing sparring did not write: it is empty, or its manifest lists every
    file it holds, or (an output from before manifests) it holds only files named in ``recognizes``."""
    return not _foreign(folder, recognizes)


def check_replaceable(
    out_dir: Path, recognizes: Iterable[str] = (), advice: str = "choose a new or empty folder"
) -> None:
    """Raise :class:`OutputRefused` unless ``out_dir`` is absent or is sparring's own earlier output; the message
    ends with ``advice`` (a caller whose folder is fixed, a pipeline stage, says what to do instead)."""
    out_dir = Path(out_dir)
    if Path(os.path.abspath(out_dir)).name == "":
        raise OutputRefused(f"{out_dir}: the filesystem root cannot be an output folder")
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise OutputRefused(
            f"{out_dir}: exists and is not a folder sparring wrote (a file or link); choose another path or remove it"
        )
    foreign = _foreign(out_dir, recognizes) if out_dir.exists() else []
    if not foreign:
        return
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    raise OutputRefused(f"{out_dir}: holds files sparring did not write ({shown}); refusing to replace it: {advice}")


def _usual_modes(folder: Path) -> None:
    """Every file under ``folder`` readable as the umask allows: safetensors writes its files 0600, beside the
    0644 of everything else in a checkpoint."""
    usual = 0o666 & ~_UMASK
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 != usual:
            path.chmod(usual)


def write_manifest(folder: Path) -> None:
    """Record every file now in ``folder`` as sparring's (deterministic: the same files give the same bytes)."""
    files = [f for f in _listing(folder) if f != MANIFEST]
    text = json.dumps({"written_by": "sparring", "files": files}, indent=1) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")


def replace_dir(out_dir: Path, fill: Callable[[Path], None], recognizes: Iterable[str] = ()) -> None:
    """Let `fill` write a whole folder into a sibling temp folder, then swap it in for `out_dir`.

    Refused (:class:`OutputRefused`, nothing written) if `out_dir` holds anything sparring did not write (see
    :func:`check_replaceable`). If `fill` raises, `out_dir` is untouched. Readers see the old folder or the new
    one, never a mix. What an earlier attempt killed mid-write left beside `out_dir` (its `.tmp-<pid>` /
    `.old-<pid>`) is removed first."""
    out_dir = Path(os.path.abspath(out_dir))
    check_replaceable(out_dir, recognizes)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        for stale in [*out_dir.parent.glob(f".{out_dir.name}.tmp-*"), *out_dir.parent.glob(f".{out_dir.name}.old-*")]:
            shutil.rmtree(stale, ignore_errors=True)
        tmp.mkdir()
    except OSError as exc:
        raise OutputRefused(f"{out_dir}: cannot write the output: {exc.strerror or exc}") from exc
    try:
        fill(tmp)
        _usual_modes(tmp)
        write_manifest(tmp)
        if out_dir.exists():
            out_dir.rename(old)
        tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def adopt_dir(folder: Path) -> None:
    """Mark an existing output folder that a version of sparring without manifests wrote as sparring's own.
    For a stage's declared outputs only (paths the pipeline owns, as DVC does): it does not check the contents."""
    folder = Path(folder)
    if folder.is_dir() and not folder.is_symlink() and not (folder / MANIFEST).exists():
        write_manifest(folder)
