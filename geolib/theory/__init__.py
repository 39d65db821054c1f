"""Paper A's theory, one room per claim: :mod:`~geolib.theory.curvature` (A2, chord–arc
curvature bias: geometry and closed forms) with its simulated scans in
:mod:`~geolib.theory.curvature_scans`, :mod:`~geolib.theory.collapse` (A1, frequency-induced
variance collapse) and :mod:`~geolib.theory.gradients` (A3, tangent gradient dominance; the
only torch user).

The math layer: plain numbers and arrays in, small frozen dataclasses out; nothing here knows
about models, files or notebooks. Argument checks and seeds: :mod:`~geolib.measure.validate`.
"""
