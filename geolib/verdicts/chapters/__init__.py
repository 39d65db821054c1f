"""One module per empirical chapter: its section of ``params.yaml`` as a frozen dataclass, a
loader of its tables, and ``verdicts(tables, section)`` returning its claim rows (v3 rules)."""
