"""The Django app of benchmarks/django (one model, one view): see run.py."""
