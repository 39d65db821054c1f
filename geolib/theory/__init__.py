"""Paper A's theory, one module per claim: :mod:`~geolib.theory.curvature` (A2, chord–arc
curvature bias), :mod:`~geolib.theory.collapse` (A1, frequency-induced variance collapse) and
:mod:`~geolib.theory.gradients` (A3, tangent gradient dominance; the only torch user).

The math layer: plain numbers and arrays in, small frozen dataclasses out; nothing here knows
about models, files or notebooks. Argument checks and seeds: :mod:`~geolib.theory.validate`.
"""
