"""geolib: geometry of language-model representations (reference reproduction of Papers A and B)."""

__version__ = "0.1.0"
