"""Open the built book in headless Chromium and check that it reads offline.

    python scripts/check_book.py [book/_build/html]

For the index and every chapter page: the page is served from 127.0.0.1, Chromium loads it
with all other hosts unresolvable, and the check fails if the browser asked for anything not
on the local server (from Chromium's net log), if any local request failed (404), or if math
was left untypeset (every ``.math`` element must contain a MathJax ``mjx-container``), or if the
page wrote an error to its console (an uncaught exception, a script that failed to load), or if
a table of a page is wider than the text column at 1280 or 1024 px and cannot be scrolled
sideways, or the claims table does not fit whole (measured by a page of the check's own that
frames the book's page at each width: :func:`layout_page`), or a figure is shown below
:data:`MIN_FIGURE_SCALE` of its drawn width or with text under :data:`MIN_TEXT_PX` (the figure
style records each PNG's smallest font: :func:`saved_figure`).
Chapter pages are also read as a reader sees them (:func:`reader_problems`): no visible code
cell before the first prose under the title, a provenance line under every figure, every
table's download link pointing at a file the book ships, and the closing sections every chapter
has (:data:`CHAPTER_SECTIONS`: Limitations, Rerun, Compute); the introduction must show the
claims table and the build's compute. Needs Debian's ``chromium`` package.
"""

from __future__ import annotations

import functools
import hashlib
import html
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from geolib.report.plotting import FONT_KEY, MIN_FONT_PX, PROBLEMS_KEY, SAVE_SCALE

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--virtual-time-budget=15000",
    "--enable-logging=stderr",  # the page's console, as "…:CONSOLE:N] "message", source: url"
    "--v=0",
]
#: a console line of Chromium's log, and what in its message makes it an error
_CONSOLE = re.compile(r':CONSOLE[:(]\d+\)?\] "(.*)", source: (\S*)', re.DOTALL)
_START = re.compile(r":CONSOLE[:(]\d+\)?\] \"")
_ERROR = re.compile(r"Uncaught|Error|error|Failed|failed|Refused|Exception")


class _Server(http.server.ThreadingHTTPServer):
    failures: list[str]


#: the widths (CSS px) at which every page must fit: a laptop and a small screen
LAYOUT_WIDTHS = (1280, 1024)
LAYOUT_PREFIX = "/__layout__/"
_REPORT = re.compile(r'<pre id="layout-report">(.*?)</pre>', re.DOTALL)


def layout_page(page: str) -> str:
    """A page of the check's own (never in the book) that shows book ``page`` in one frame per
    width of :data:`LAYOUT_WIDTHS` and, once laid out, writes into ``#layout-report`` (JSON)
    every table of the article wider than the article's text column at that width that the
    reader cannot scroll sideways (clipped), and the claims table if it does not fit whole."""
    frames = "".join(
        f'<iframe data-width="{w}" src="/{page}" style="width:{w}px;height:800px;border:0">'
        "</iframe>"
        for w in LAYOUT_WIDTHS
    )
    script = """
const frames = [...document.querySelectorAll("iframe")];
let loaded = 0;
function scrolls(t, col) {  // an ancestor inside the column that scrolls it sideways
  for (let a = t.parentElement; a && a !== col; a = a.parentElement) {
    const o = a.ownerDocument.defaultView.getComputedStyle(a).overflowX;
    if ((o === "auto" || o === "scroll") && a.clientWidth < t.scrollWidth) return true;
  }
  return false;
}
function measure() {
  const found = [];
  for (const f of frames) {
    const d = f.contentDocument, w = f.dataset.width;
    const col = d.querySelector("article") || d.body;
    const cs = d.defaultView.getComputedStyle(col);
    const width = col.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    col.querySelectorAll("table").forEach((t, i) => {
      const strict = t.classList.contains("claims-table");
      if (t.scrollWidth > width + 1 && (strict || !scrolls(t, col))) {
        const how = strict ? "must fit" : "clipped, not scrollable";
        found.push(`at ${w} px: table ${i + 1} is ${t.scrollWidth} px wide in a `
                   + `${Math.round(width)} px column (${how})`);
      }
    });
  }
  document.getElementById("layout-report").textContent = JSON.stringify(found);
  const figs = [];  // every figure at the first width: drawn and shown width (CSS px)
  const d = frames[0].contentDocument;
  (d.querySelector("article") || d.body).querySelectorAll("img").forEach(img => {
    if (img.naturalWidth > 0) {
      figs.push({src: img.getAttribute("src"), natural: img.naturalWidth,
                 shown: Math.round(img.getBoundingClientRect().width)});
    }
  });
  document.getElementById("figure-report").textContent = JSON.stringify(figs);
}
frames.forEach(f => f.addEventListener("load", () => {
  if (++loaded === frames.length) setTimeout(measure, 3000);
}));
"""
    return (
        '<!doctype html><html><body style="margin:0;width:3000px">'
        f'{frames}<pre id="layout-report">not measured</pre>'
        f'<pre id="figure-report">[]</pre><script>{script}</script>'
        "</body></html>"
    )


_FIGURES = re.compile(r'<pre id="figure-report">(.*?)</pre>', re.DOTALL)
#: below this display scale (shown ÷ drawn width at 1×, at 1280 px) a figure is shrunk too far
MIN_FIGURE_SCALE = 0.6
#: the smallest text a reader should meet in a figure, CSS px as shown: the figure style's own
#: minimum (``plotting.MIN_FONT_PX``), read there so the two cannot drift apart

MIN_TEXT_PX = MIN_FONT_PX


#: the image the findings page opens with (``geolib.report.findings_figure``)
FINDINGS_FIGURE = "findings_forest.png"


def opening_figure(dom: str, name: str) -> list[str]:
    """What is wrong with a page that must open with the figure ``name``: no image at all, or
    its first image another one (the browser loads it; a missing file is a server failure)."""
    article = dom.find("<article")  # the page's own content, not the theme's header
    first = re.search(r"<img\b[^>]*>", dom[max(article, 0) :])
    if first is None:
        return [f"no figure on the page (it opens with {name})"]
    src = re.search(r'src="([^"]*)"', first.group(0))
    if src is None or Path(src.group(1)).name != name:
        shown = src.group(1) if src else "an image without a source"
        return [f"the page opens with {shown}, not {name}"]
    return []


def saved_figure(png: Path) -> tuple[float, float | None, str]:
    """``(width at 1×, smallest font px at 1×, problems)`` of a PNG the figure style saved (its
    text chunks record the font and what its checks found; the PNG is ``SAVE_SCALE`` × its 1×
    width); another image counts as drawn at 1×, its font unknown, no problems recorded."""
    from PIL import Image

    with Image.open(png) as im:
        text = getattr(im, "text", {}) or {}
        if FONT_KEY in text:
            return im.width / SAVE_SCALE, float(text[FONT_KEY]), text.get(PROBLEMS_KEY, "")
        return float(im.width), None, ""


def figure_scales(dom: str, page: Path | None = None, root: Path | None = None) -> list[dict]:
    """Every figure of the page :func:`layout_page` framed at the first width: ``src``,
    ``natural`` (pixel) and ``shown`` width in px, the figure's ``drawn`` width at 1×,
    ``scale`` = shown ÷ drawn and ``text_px``, its smallest text as shown (when the book's file
    at ``root / page``'s ``src`` records it; else ``None`` and drawn = natural)."""
    m = _FIGURES.search(dom)
    figs = json.loads(html.unescape(m.group(1))) if m else []
    out = []
    for f in figs:
        drawn, font, recorded = float(f["natural"]), None, ""
        if page is not None and root is not None:
            png = (root / page).parent / f["src"]
            if png.is_file():
                drawn, font, recorded = saved_figure(png)
        scale = f["shown"] / drawn
        text_px = font * scale if font else None
        out.append(f | {"drawn": drawn, "scale": scale, "text_px": text_px, "recorded": recorded})
    return out


def figure_problems(figures: list[dict]) -> list[str]:
    """The figures shown below :data:`MIN_FIGURE_SCALE`, with text under :data:`MIN_TEXT_PX`, or
    saved with problems the figure style found (too wide, small text, overlapping labels)."""
    problems = []
    for f in figures:
        name = Path(f["src"]).name
        if f["scale"] < MIN_FIGURE_SCALE:
            problems.append(
                f"figure {name} shown at {f['scale']:.2f} of its drawn width "
                f"({f['drawn']:.0f} px shown at {f['shown']} px)"
            )
        if f["text_px"] is not None and f["text_px"] < MIN_TEXT_PX - 0.05:
            problems.append(f"figure {name} shows text at {f['text_px']:.1f} px")
        if f.get("recorded"):
            problems.append(f"figure {name} was saved with problems: {f['recorded']}")
    return problems


def layout_problems(dom: str) -> list[str]:
    """The tables :func:`layout_page` found too wide, from its dumped DOM."""
    m = _REPORT.search(dom)
    if not m or m.group(1).strip() == "not measured":
        return ["layout not measured (the page did not load in time)"]
    return list(json.loads(html.unescape(m.group(1))))


def _handler(root: Path):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def handle(self):  # the browser may drop connections at exit: not a book problem
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.startswith(LAYOUT_PREFIX):
                body = layout_page(self.path.removeprefix(LAYOUT_PREFIX)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, fmt, *args):  # quiet, but remember failures
            if len(args) > 1 and str(args[1])[:1] in "45" and self.path != "/favicon.ico":
                self.server.failures.append(f"{args[1]} {self.path}")

    return functools.partial(Handler, directory=str(root))


def external_requests(netlog: Path, origin: str) -> list[str]:
    """URLs the *page* asked for that are not on the local origin, from a Chromium net log.

    Requests are attributed to the page by their network isolation key (the page's site);
    the browser's own background traffic (update checks, accounts) carries another key and
    is not the book's doing, so it is ignored.
    """
    try:
        log = json.loads(netlog.read_text(errors="replace"))
    except json.JSONDecodeError:  # Chromium killed mid-write: close the event list
        log = json.loads(netlog.read_text(errors="replace").rstrip().rstrip(",") + "]}")
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    site = origin.rsplit(":", 1)[0]  # http://127.0.0.1
    urls = {
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start_job and site in e.get("params", {}).get("network_isolation_key", "")
    }
    internal = (origin, "data:", "about:", "chrome:", "blob:")
    return sorted(u for u in urls if not u.startswith(internal))


_CELL = re.compile(r'<div class="cell[ "]')
#: the sections every chapter ends with, by their HTML ids (the last from the run log,
#: appended by book/_ext/compute_sections.py)
CHAPTER_SECTIONS = ("limitations", "rerun", "compute")
_STRAY = re.compile(r"(?:Posix|Windows)?Path\('[^']*'\)")


def reader_problems(dom: str, page: Path, root: Path) -> list[str]:
    """What a reader of chapter ``page`` (its path under the book ``root``) would miss in its
    rendered ``dom``: code shown before the prose, a figure without its provenance line, a
    table link to a file the book does not ship."""
    problems = []
    cells = _CELL.split(dom)[1:]
    visible = [c for c in cells if "cell_input" in c and "hide above-input" not in c]
    title = dom.find("<h1")
    prose = dom.find("<p", title) if title >= 0 else -1
    first_code = min((dom.find(c) for c in visible), default=-1)
    if visible and (prose < 0 or first_code < prose):
        problems.append("a code cell is visible before the first prose under the title")
    for i, cell in enumerate(cells):
        n_img = len(re.findall(r"<img\b", cell))
        n_prov = cell.count('class="provenance"')
        if n_img > n_prov:
            problems.append(f"cell {i}: {n_img} figure(s), {n_prov} provenance line(s)")
    for cell in cells:  # a value echoed by a cell's last line, e.g. the path a figure saved to
        out = cell.split("cell_output", 1)[1] if "cell_output" in cell else ""
        for shown in sorted(set(_STRAY.findall(html.unescape(out)))):
            problems.append(f"a stray output box shows {shown}")
    ids = set(re.findall(r'<section id="([^"]+)"', dom))
    problems += [f"no {s!r} section" for s in CHAPTER_SECTIONS if s not in ids]
    for href in re.findall(r'class="table-download" href="([^"]+)"', dom):
        target = (root / page).parent / href
        if not target.resolve().is_file():
            problems.append(f"table link {href} does not resolve to a file in the book")
    return problems


def unpinned_provenance(dom: str, tree_clean: bool) -> list[str]:
    """Provenance lines that say "uncommitted changes" in a book built from a work tree that is
    clean now (the line must pin the code: pipeline outputs and ``dvc.lock`` never make it
    dirty). Nothing to say when the tree is not clean, or not a git tree."""
    if not tree_clean:
        return []
    lines = re.findall(r'<div class="provenance">(.*?)</div>', dom, flags=re.DOTALL)
    bad = [line for line in lines if "uncommitted changes" in line]
    return (
        [f"{len(bad)} provenance line(s) name uncommitted changes in a clean tree"] if bad else []
    )


def console_errors(log: str) -> list[str]:
    """The error messages the page wrote to its console (uncaught exceptions, failed loads),
    from Chromium's stderr log."""
    entries: list[str] = []  # one per console message; a message may span lines (a stack)
    for line in log.splitlines():
        if _START.search(line):
            entries.append(line)
        elif entries and not _CONSOLE.search(entries[-1]):
            entries[-1] += "\n" + line
    found = (_CONSOLE.search(e) for e in entries)
    return [
        f"{m.group(1).splitlines()[0]} ({m.group(2)})"
        for m in found
        if m and _ERROR.search(m.group(1))
    ]


def check_page(
    chromium: str,
    url: str,
    origin: str,
    workdir: Path,
    root: Path,
    tree_clean: bool = False,
    figures: list[dict] | None = None,
) -> list[str]:
    """What is wrong with the book page at ``url``; its figures' display scales are appended to
    ``figures`` (if given)."""
    netlog = workdir / "netlog.json"
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'profile'}",
           f"--log-net-log={netlog}", "--dump-dom", url]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    dom = done.stdout
    problems = [f"external request: {u}" for u in external_requests(netlog, origin)]
    problems += [f"console error: {m}" for m in console_errors(done.stderr)]
    n_math = len(re.findall(r'class="math[ "]', dom))
    n_rendered = len(re.findall(r"<mjx-container", dom))
    if n_rendered < n_math:
        problems.append(f"math not typeset: {n_math} math elements, {n_rendered} rendered")
    if "<body" not in dom:
        problems.append("page did not load")
    page = Path(url.removeprefix(origin))
    if page.name == "findings.html":
        if dom.count("The paper says") < 15:
            problems.append("the findings page lacks a paragraph per claim")
        problems += opening_figure(dom, FINDINGS_FIGURE)
    if page.name == "intro.html":
        if 'class="claims-table' not in dom:
            problems.append("no claims table (class claims-table) on the introduction")
        if '<section id="compute"' not in dom:
            problems.append("no compute section on the introduction")
    if page.parts[:1] == ("chapters",):
        problems += reader_problems(dom, page, root)
        problems += unpinned_provenance(dom, tree_clean)
    layout = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'layout'}", "--dump-dom",
              origin.rstrip("/") + LAYOUT_PREFIX + page.as_posix()]  # fmt: skip
    laid = subprocess.run(layout, capture_output=True, text=True, timeout=120)
    problems += layout_problems(laid.stdout)
    shown = figure_scales(laid.stdout, page, root)
    problems += figure_problems(shown)
    if figures is not None:
        figures.extend(f | {"page": page.as_posix()} for f in shown)
    return problems


def figure_files(repo: Path) -> dict[str, str]:
    """``{sha256: "figures/<stage>/<name>.png"}``: the book names each image by the SHA-256 of
    its bytes (``_images/<sha256>.png``), so this gives back the figure's own name."""
    return {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.relative_to(repo).as_posix()
        for p in sorted((repo / "figures").glob("*/*.png"))
    }


def figure_summary(figures: list[dict], names: dict[str, str] | None = None) -> str:
    """One paragraph on the figures' display scales at 1280 px: how many, their range and
    median, and each one shown below :data:`MIN_FIGURE_SCALE` (scale, sizes, page, file:
    ``names`` maps an image's book name to its own, see :func:`figure_files`)."""
    names = names or {}
    if not figures:
        return "figures: none found"
    scales = sorted(f["scale"] for f in figures)
    small = sorted((f for f in figures if f["scale"] < MIN_FIGURE_SCALE), key=lambda f: f["scale"])
    texts = sorted(f["text_px"] for f in figures if f.get("text_px") is not None)
    smallest = f"; smallest text shown {texts[0]:.1f} px" if texts else ""
    lines = [
        f"figures at 1280 px: {len(figures)}, display scale {scales[0]:.2f}–{scales[-1]:.2f} "
        f"(median {scales[len(scales) // 2]:.2f}); {len(small)} below {MIN_FIGURE_SCALE}" + smallest
    ]
    lines += [
        f"  {f['scale']:.2f}  {f['drawn']:.0f} px shown at {f['shown']} px  "
        f"{f['page']}: {names.get(Path(f['src']).stem, Path(f['src']).name)}"
        for f in small
    ]
    return "\n".join(lines)


def _repo_of(html_root: Path) -> Path:
    """The repository a book was built in: ``<repo>/book/_build/html``."""
    return html_root.parents[2] if len(html_root.parents) > 2 else html_root


def _tree_clean(html_root: Path) -> bool:
    """Whether the repository the book was built in (``<repo>/book/_build/html``) is a git tree
    with a commit and nothing changed but what a pipeline run writes."""
    repo = _repo_of(html_root)
    from geolib.report.outputs import git_state

    state = git_state(repo)
    return state["commit"] is not None and state["dirty"] is False


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "book/_build/html").resolve()
    if not (root / "index.html").is_file():
        print(f"no built book at {root} (run `dvc repro` first)", file=sys.stderr)
        return 2
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    server = _Server(("127.0.0.1", 0), _handler(root))
    server.failures = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}/"
    pages = [
        "index.html",
        "findings.html",
        "intro.html",
        *sorted(p.relative_to(root).as_posix() for p in root.glob("chapters/*.html")),
    ]
    tree_clean = _tree_clean(root)
    report: dict[str, list[str]] = {}
    figures: list[dict] = []
    for page in pages:
        with tempfile.TemporaryDirectory() as tmp:
            report[page] = check_page(
                chromium, origin + page, origin, Path(tmp), root, tree_clean, figures
            )
    server.shutdown()
    if server.failures:
        report["local server"] = sorted(set(server.failures))
    bad = {k: v for k, v in report.items() if v}
    for page in pages:
        print(f"{'FAIL' if report[page] else 'ok  '} {page}")
    print(figure_summary(figures, figure_files(_repo_of(root))))
    if bad:
        print(json.dumps(bad, indent=2), file=sys.stderr)
        return 1
    print(
        f"book reads offline: {len(pages)} pages, no external requests, all math typeset; "
        "no console errors; no table clipped (the claims table whole) and no figure shrunk or "
        f"with text under {MIN_TEXT_PX:g} px at "
        f"{' or '.join(map(str, LAYOUT_WIDTHS))} px; chapters open with prose, every figure has "
        "its provenance, no stray output box, every table link resolves"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
