"""Log the files each pipeline stage's Python processes open (``run_profile.py --audit``).

Imported at start-up by every Python process whose ``PYTHONPATH`` holds this folder. A process
started by a DVC stage (DVC sets ``DVC_STAGE`` for the stage's command and its children, e.g. a
papermill kernel) appends one JSON line per distinct file it opens under
``GEOLIB_AUDIT_ROOT`` to ``GEOLIB_AUDIT_DIR/<pid>.jsonl``: ``{"stage", "path", "write"}``.
Folders and reads of files that do not exist (probes for optional config) are not logged.
Files opened by native code (Rust tokenizers, safetensors) are not seen: the ``open`` audit
event covers Python's ``open``/``io.open``/``os.open``.
"""

import json
import os
import sys

_STAGE = os.environ.get("DVC_STAGE")
_DIR = os.environ.get("GEOLIB_AUDIT_DIR")
_ROOT = os.environ.get("GEOLIB_AUDIT_ROOT")
_SKIP = ("/.dvc/", "/.git/", "/__pycache__/", "/.ipynb_checkpoints/")
#: compiled modules and extensions, opened by every import: skipped before the costly
#: ``realpath`` (which made the hook cost ~0.9 s per stage)
_COMPILED = (".pyc", ".so")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _install(stage: str, log_dir: str, root: str) -> None:
    os.makedirs(log_dir, exist_ok=True)
    log = open(os.path.join(log_dir, f"{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115
    root = os.path.realpath(root) + os.sep
    seen: set[tuple[str, bool]] = set()

    def hook(event: str, args: tuple) -> None:
        if event != "open":
            return
        path, mode, flags = args
        if isinstance(path, int) or path is None:
            return
        path = os.fsdecode(path)
        if path.endswith(_COMPILED):  # imports: thousands per process, never a stage's data
            return
        full = os.path.realpath(os.path.join(os.getcwd(), path))
        if not full.startswith(root) or any(s in full for s in _SKIP) or full.startswith(log_dir):
            return
        if mode is not None:
            write = any(c in str(mode) for c in "wax+")
        else:
            write = bool((flags or 0) & _WRITE_FLAGS)
        if os.path.isdir(full) or (not write and not os.path.exists(full)):
            return  # a folder, or a probe for an optional file that is not there
        key = (full[len(root) :], write)
        if key not in seen:
            seen.add(key)
            log.write(json.dumps({"stage": stage, "path": key[0], "write": write}) + "\n")

    sys.addaudithook(hook)


if _STAGE and _DIR and _ROOT:
    _install(_STAGE, os.path.realpath(_DIR), _ROOT)
