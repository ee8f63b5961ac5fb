"""Studies: a scenario (systems x workloads x sweeps, from YAML), its check before
running, the plan of points it expands to, the executors that run them (in-process,
worker processes, Dask), the point log, progress, and the vendor claims read off a run.
"""
