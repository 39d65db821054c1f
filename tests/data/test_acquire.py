"""Tests of geolib.data.acquire with archives made here and a fake registry client (nothing is
downloaded)."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from geolib.data import acquire
from geolib.data.acquire import (
    AcquisitionError,
    _run,
    fetch_artifact,
    read_members,
    slug,
)
from geolib.files import sha256_file
from tests.synthetic_packages import SOURCES, make_targz


def make_deb(path: Path, files: dict[str, bytes]) -> Path:
    """A minimal Debian package: ar archive with debian-binary, control.tar.xz, data.tar.xz."""

    def tar_xz(entries: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as tar:
            for name, blob in entries.items():
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
        return buf.getvalue()

    members = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", tar_xz({"./control": b"Package: fake\n"})),
        ("data.tar.xz", tar_xz({f"./{k}": v for k, v in files.items()})),
    ]
    out = bytearray(b"!<arch>\n")
    for name, body in members:
        header = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n"
        out += header.encode() + body + (b"\n" if len(body) % 2 else b"")
    path.write_bytes(bytes(out))
    return path


# ------------------------------------------------------------------------------------------------
# archive members
# ------------------------------------------------------------------------------------------------


def test_read_members_from_targz_zip_and_deb(tmp_path):
    files = {"pkg/texts/a_gut.txt": "alpha", "pkg/texts/b_gut.txt": "beta", "pkg/x.py": "code"}
    tgz = make_targz(tmp_path / "p.tar.gz", files)
    assert read_members(tgz, ["*/texts/*.txt"]) == {
        "pkg/texts/a_gut.txt": b"alpha",
        "pkg/texts/b_gut.txt": b"beta",
    }
    assert read_members(tgz, ["*.txt"], ["*/b_*"]) == {"pkg/texts/a_gut.txt": b"alpha"}
    whl = tmp_path / "p.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("pkg/data.txt", "zipped")
    assert read_members(whl) == {"pkg/data.txt": b"zipped"}
    deb = make_deb(tmp_path / "p.deb", {"usr/share/doc/p/x.txt": b"debian"})
    assert read_members(deb, ["*.txt"]) == {"usr/share/doc/p/x.txt": b"debian"}


def test_read_members_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_members(tmp_path / "missing.tar.gz")
    bad = tmp_path / "x.rar"
    bad.write_bytes(b"??")
    with pytest.raises(ValueError, match="unsupported"):
        read_members(bad)
    fake_deb = tmp_path / "x.deb"
    fake_deb.write_bytes(b"not an ar archive")
    with pytest.raises(ValueError, match="Debian"):
        read_members(fake_deb)


def test_slug():
    assert slug("Antony & Cleopatra") == "antony-cleopatra"
    assert slug("Émile") == "emile"
    with pytest.raises(ValueError):
        slug("!!!")


# ------------------------------------------------------------------------------------------------
# acquisition (with a fake registry client)
# ------------------------------------------------------------------------------------------------


def test_fetch_artifact_caches_and_verifies_checksums(fake_pypi, tmp_path):
    source = SOURCES[0]
    first = fetch_artifact(source, tmp_path)
    assert not first["cached"] and fake_pypi == ["novels"]
    artifact = tmp_path / "novels" / first["artifact"]
    assert sha256_file(artifact) == first["sha256"]
    assert (
        json.loads((tmp_path / "novels" / "manifest.json").read_text())["sha256"] == first["sha256"]
    )
    again = fetch_artifact(source, tmp_path)
    assert again["cached"] and fake_pypi == ["novels"]
    artifact.write_bytes(b"corrupted")  # a damaged cache is fetched again
    assert not fetch_artifact(source, tmp_path)["cached"] and fake_pypi == ["novels"] * 2
    with pytest.raises(AcquisitionError, match="sha256"):
        fetch_artifact({**source, "name": "other", "sha256": "0" * 64}, tmp_path)
    with pytest.raises(ValueError, match="registry"):
        fetch_artifact({**source, "registry": "cran"}, tmp_path)
    with pytest.raises(ValueError, match="lacks 'package'"):
        fetch_artifact({"name": "x", "registry": "pypi"}, tmp_path)


def test_missing_client_is_a_clear_error(tmp_path):
    with pytest.raises(AcquisitionError, match="not installed"):
        _run(["definitely-not-a-registry-client-xyz"], tmp_path, 5)


def test_unpinned_or_mismatching_source_is_refused(fake_pypi, tmp_path):
    source = SOURCES[0]
    for missing in ("version", "sha256"):
        with pytest.raises(ValueError, match=f"no {missing} pinned"):
            fetch_artifact({**source, missing: None}, tmp_path)
    with pytest.raises(ValueError, match="64 hex digits"):
        fetch_artifact({**source, "sha256": "abc"}, tmp_path)
    assert fake_pypi == []  # refused before any download
    # a file whose bytes differ from the pin is refused and leaves no artifact behind
    wrong = "f" * 64
    with pytest.raises(AcquisitionError, match=f"expected {wrong}"):
        fetch_artifact({**source, "sha256": wrong}, tmp_path)
    assert not list((tmp_path / "novels").glob("*.tar.gz"))
    # a source distribution asked for by name (pip prefers a release's wheel)
    assert fetch_artifact({**source, "dist": "sdist"}, tmp_path)["sha256"] == source["sha256"]
    assert fake_pypi == ["novels", "novels (sdist)"]
    with pytest.raises(ValueError, match="pypi only"):
        fetch_artifact({**source, "name": "n2", "registry": "npm", "dist": "sdist"}, tmp_path)
    # a cached copy fetched under one pin is not reused under another
    with pytest.raises(AcquisitionError, match="sha256"):
        fetch_artifact({**source, "sha256": wrong}, tmp_path)


def test_apt_serves_the_pinned_version_or_fails(monkeypatch, tmp_path):
    """No fallback to the archive's current candidate: that made a domain's text depend on
    the day it was fetched."""
    calls = []

    class Proc:
        def __init__(self, returncode, stdout=""):
            self.returncode, self.stdout, self.stderr = returncode, stdout, "not found"

    def fake_run(cmd, cwd, timeout):
        calls.append(cmd)
        if cmd[:2] == ["apt-cache", "policy"]:
            return Proc(0, "  Candidate: 3.11.2-6+deb12u9\n")
        return Proc(0 if cmd[:2] == ["apt-get", "update"] else 100)

    monkeypatch.setattr(acquire, "_run", fake_run)
    with pytest.raises(AcquisitionError, match=r"no longer serves pkg=1\.0.*deb12u9"):
        acquire._download_apt("pkg", "1.0", tmp_path, 5)
    downloads = [c[-1] for c in calls if c[:2] == ["apt-get", "download"]]
    assert downloads == ["pkg=1.0", "pkg=1.0"]  # before and after one update; never bare "pkg"
    with pytest.raises(AcquisitionError, match="no version pinned"):
        acquire._download_apt("pkg", None, tmp_path, 5)


def test_every_corpus_and_model_source_in_params_is_pinned():
    from geolib.config import load_params
    from tests.repo import ROOT

    params = load_params(ROOT / "params.yaml")
    sources = list(params["data"]["sources"])
    for model in params["pretrained"]["models"].values():
        sources += [model, *model.get("parts", [])]
    for source in sources:
        assert str(source.get("version") or ""), source.get("name", source.get("package"))
        assert len(str(source.get("sha256") or "")) == 64, source.get("name", source.get("package"))
