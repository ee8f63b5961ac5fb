"""Validated, frozen specs from YAML: chips, systems, and where shipped configs live."""

from tpusim.config.chip import ChipSpec
from tpusim.config.loader import System, configs_dir, load_chip, load_system, shipped
from tpusim.config.system import SystemSpec

__all__ = ["ChipSpec", "System", "SystemSpec", "configs_dir", "load_chip", "load_system", "shipped"]
