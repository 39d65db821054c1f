"""A local Sphinx extension: each page's scripts once.

sphinx-thebe 0.3.1 adds its inline configuration (``const THEBE_JS_URL = …``) every time its
``env-before-read-docs`` handler runs, and Jupyter Book 1 runs that event more than once per
build, so pages carried the block twice and the browser stopped at the second ``const`` with
"Identifier 'THEBE_JS_URL' has already been declared". Identical script entries (same file, or
same inline body) are kept once, in their first place.
"""

from __future__ import annotations

from typing import Any


def _dedupe(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # Sphinx's entries: ``filename`` (None or "" for an inline body) and ``attributes``
        name = getattr(script, "filename", script) or ""
        key = (str(name), tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
