"""Run the whole pipeline on a profile in a scratch copy of the working tree.

    python scripts/run_profile.py smoke      # what `make smoke` and CI run

A profile (``profiles/NAME.yaml``) replaces some keys of ``params.yaml``. Applying it in the
workspace would rewrite ``params.yaml`` and ``dvc.lock`` and replace the default results, so
this copies the working tree (tracked files and untracked files git does not ignore, with
uncommitted edits) into ``profile-runs/NAME/``, writes the merged parameters there and runs
``dvc repro`` in that copy. The workspace is not touched: ``git status`` stays as it was.

Kept between runs of the same profile: the copy's DVC cache (so an unchanged stage is restored,
not recomputed) and its download caches, which are seeded from the workspace's when present
(their sha256 is re-checked by the stages). The book ends in
``profile-runs/NAME/book/_build/html``.

With ``--audit``, every Python process the pipeline starts logs the files it opens (see
``scripts/audit/sitecustomize.py``) and ``scripts/check_io.py`` then checks them against each
stage's deps and outs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from geolib.config import apply_profiles, load_params
from geolib.models import ladder
from geolib.models.grid import check_grid, check_names_listed
from geolib.models.replicas import check_listed

ROOT = Path(__file__).resolve().parents[1]
#: Download caches (``persist: true`` outs) worth keeping and seeding: they are slow to fetch.
CACHES = ("data/raw", "data/raw_models")


def working_tree_files(root: Path) -> list[str]:
    """Tracked files that exist plus untracked files git does not ignore, repo-relative."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (root / f).is_file()})


def clear_copy(dest: Path) -> None:
    """Empty ``dest`` except its DVC cache and the download caches."""
    keep = {dest / ".profile-run", dest / ".dvc" / "cache", *(dest / c for c in CACHES)}
    for path in sorted(dest.rglob("*"), key=lambda p: -len(p.parts)):
        if any(path == k or k in path.parents for k in keep):
            continue
        if any(path in k.parents for k in keep):
            continue  # a parent of something kept: emptied, not removed
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def seed_cache(source: Path, target: Path) -> None:
    """Hard-link (or copy) the workspace's download cache into the copy if it has none."""
    if target.exists() or not source.is_dir():
        return

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)


def merged_params(profile_file: Path, base: Path = ROOT / "params.yaml") -> dict:
    """``params.yaml`` with the profile applied, its designs checked before anything runs: every
    sweep point trains at least ``grid.MIN_STEPS`` steps at its batch size, and the listed sweep
    points and saturation runs equal their designs (an error names the point and why)."""
    params = apply_profiles(load_params(base), profile_file)
    try:
        check_grid(params)
        check_names_listed(params["saturation"])
        check_listed(params)
        ladder.check_listed(params)
    except (ValueError, KeyError) as exc:
        raise SystemExit(f"profile {profile_file}: {exc}") from exc
    return params


def prepare(profile: str, dest: Path) -> Path:
    """Build the scratch copy for ``profile`` in ``dest``; return its merged params file."""
    profile_file = ROOT / "profiles" / f"{profile}.yaml"
    if not profile_file.is_file():
        names = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
        raise SystemExit(f"no profile {profile!r} (profiles: {names})")
    params = merged_params(profile_file)
    marker = dest / ".profile-run"
    if dest.exists() and any(dest.iterdir()):
        if not marker.is_file():
            raise SystemExit(
                f"{dest} is not empty and was not made by this script; not touching it"
            )
        clear_copy(dest)
    dest.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"scratch copy for profile {profile}; emptied by scripts/run_profile.py\n")
    for rel in working_tree_files(ROOT):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    for cache in CACHES:
        seed_cache(ROOT / cache, dest / cache)
    header = f"# params.yaml with profiles/{profile}.yaml applied (scripts/run_profile.py)\n"
    (dest / "params.yaml").write_text(header + yaml.safe_dump(params, sort_keys=False))
    if not (dest / ".git").exists():  # DVC keeps .gitignore files, so it wants a git repo
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest / "params.yaml"


def missing_chapters(dest: Path) -> list[str]:
    """The chapters (``notebooks/*.ipynb``) with no page in the copy's built book."""
    html = dest / "book" / "_build" / "html" / "chapters"
    return sorted(
        nb.stem
        for nb in (dest / "notebooks").glob("*.ipynb")
        if not (html / f"{nb.stem}.html").is_file()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="name of a file in profiles/, without .yaml")
    parser.add_argument("--dest", type=Path, help="the copy (default profile-runs/PROFILE)")
    parser.add_argument("--audit", action="store_true", help="log and check every file opened")
    args = parser.parse_args(argv)
    dest = (args.dest or ROOT / "profile-runs" / args.profile).resolve()
    inside = dest == ROOT or ROOT in dest.parents
    if inside and not dest.is_relative_to(ROOT / "profile-runs"):
        raise SystemExit(f"--dest must be outside the repository or under profile-runs/: {dest}")
    prepare(args.profile, dest)
    env = dict(os.environ)
    # The copy's geolib, not the workspace's editable install, in every process DVC starts.
    python_path = [str(dest)]
    audit_dir = dest / "audit"
    if args.audit:
        python_path.insert(0, str(dest / "scripts" / "audit"))
        env["GEOLIB_AUDIT_DIR"] = str(audit_dir)
        env["GEOLIB_AUDIT_ROOT"] = str(dest)
    env["PYTHONPATH"] = os.pathsep.join(python_path + [env.get("PYTHONPATH", "")]).rstrip(":")
    print(f"profile {args.profile}: running the pipeline in {dest}", flush=True)
    lanes = [sys.executable, str(dest / "scripts" / "lanes.py"), "--pipeline"]
    subprocess.run(lanes, cwd=dest, env=env, check=True)  # as `make all` runs it
    if args.audit:
        check = [sys.executable, str(dest / "scripts" / "check_io.py"), str(audit_dir)]
        subprocess.run(check, cwd=dest, check=True)
    missing = missing_chapters(dest)
    if missing:
        raise SystemExit(f"profile {args.profile}: the book has no page for {missing}")
    chapters = len(list((dest / "notebooks").glob("*.ipynb")))
    book = dest / "book" / "_build" / "html"
    print(f"profile {args.profile}: book with all {chapters} chapters in {book}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
