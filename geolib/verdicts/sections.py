"""Which section of the parameters file each chapter reads: its own, by name, unless it
shares another's (the three sweep chapters share the rules of ``geometry_performance``, and
their overrides are checked against that section). Read by the chapters, by the notebooks'
runner and by the runs' records (:mod:`geolib.report.outputs`)."""

from __future__ import annotations

#: Chapters that read another chapter's section of the parameters (their overrides are checked
#: against it): the three sweep chapters share the rules of ``geometry_performance``.
SHARED_SECTION = {
    "training_knobs": "geometry_performance",
    "forgetting_quantization": "geometry_performance",
}


def section_of(chapter: str) -> str:
    """The section of the parameters file that ``chapter`` reads: its own, by name, unless
    :data:`SHARED_SECTION` names another."""
    return SHARED_SECTION.get(chapter, chapter)
