"""Studies: a scenario (systems x workloads x sweeps, from YAML), checked, run and
written to a folder.

* :mod:`.scenario`: a scenario file in three steps, :mod:`.reading` (the YAML parsed
  once), :mod:`.checking` (validated, systems loaded) and :mod:`.expanding` (its
  workload points), and its outputs;
* :mod:`.pointset`: every (system, workload point) as a frozen point, what workers
  receive (the file is never read again);
* :mod:`.systems`: ``systems:`` entries (ICI sweeps) and the shipped scenarios;
* :mod:`.check`: every problem of a scenario, found before running;
* :mod:`.points`: one workload point on one system, its outcome or its failure;
* :mod:`.runner`: the points run in this process, in worker processes
  (:mod:`.workers`) or on Dask (:mod:`.executors`);
* :mod:`.point_log`: each finished point kept as it comes back; :mod:`.progress`:
  the progress bar on stderr;
* :mod:`.claims`: Google's published TPU 8 claims against tpusim's figures (a run's
  rows where present).
"""
