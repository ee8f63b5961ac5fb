"""Public measured collective timings on TPUs, the data ``tpusim validate`` and
``tpusim calibrate`` compare the simulator with."""

from tpusim.validation.measurements import (
    Measurement,
    group_size,
    load_measurements,
    shipped_measurement_files,
)

__all__ = ["Measurement", "group_size", "load_measurements", "shipped_measurement_files"]
