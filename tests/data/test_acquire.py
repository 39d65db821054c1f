"""Tests of geolib.data.acquire with archives made here and a fake registry client (nothing is
downloaded)."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

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
