"""What the harness knows of Karpenter, read from its code and true in every mode: its clocks,
settings, features by release, compatibility, log noise and wording, the inputs it decides on,
requirement semantics, when it has settled and the mutants (regressions of it)."""
