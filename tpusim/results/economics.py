"""The economics of one simulated step: throughput, power, energy and cost
(:class:`Economics`), the columns a program's record (:mod:`tpusim.results.records`)
ends with."""

from __future__ import annotations

from dataclasses import dataclass, fields

from tpusim.results.energy import mean_power_W

#: Seconds in an hour (chip-hours from seconds).
SECONDS_PER_HOUR = 3600.0
#: Tokens in the "per million tokens" cost column.
TOKENS_PER_MILLION = 1e6


@dataclass(frozen=True)
class Economics:
    """Throughput, energy and cost of one step; a column is None (and left out of the
    row) when its input is unknown: tokens for the token columns, power for energy,
    a price for cost.

    Power follows :mod:`tpusim.results.energy`: ``full_load_power_per_chip_W`` (the
    all-in power at full load) scaled by ``busy_share`` (the step's TensorCore busy
    fraction) to the step's mean ``power_per_chip_W``. Token figures count the tokens
    of the program simulated (for a model fragment, e.g. 2 of 80 layers, the energy
    and cost per token of that fragment, not of the whole model)."""

    chip_hours_per_step: float
    tokens_per_s: float | None = None
    tokens_per_s_per_chip: float | None = None
    full_load_power_per_chip_W: float | None = None
    busy_share: float | None = None
    power_per_chip_W: float | None = None
    energy_per_step_J: float | None = None
    energy_per_token_J: float | None = None
    cost_per_step_usd: float | None = None
    cost_per_million_tokens_usd: float | None = None

    @classmethod
    def of(
        cls,
        step_time_s: float,
        num_chips: int,
        tokens_per_step: float | None = None,
        power_per_chip_W: float | None = None,
        price_per_chip_hour_usd: float | None = None,
        busy_share: float = 1.0,
    ) -> Economics:
        """From the step time (s), the system's chips, tokens one step processes, the
        all-in power per chip at full load (W), the price per chip-hour (USD) and the
        step's busy share (0..1, :func:`tpusim.results.energy.busy_share`)."""
        step, chips, tokens = step_time_s, num_chips, tokens_per_step or None
        hours = chips * step / SECONDS_PER_HOUR
        mean_W = mean_power_W(power_per_chip_W, busy_share) if power_per_chip_W else None
        energy = mean_W * chips * step if mean_W is not None else None
        cost = price_per_chip_hour_usd * hours if price_per_chip_hour_usd is not None else None
        return cls(
            chip_hours_per_step=hours,
            tokens_per_s=tokens / step if tokens else None,
            tokens_per_s_per_chip=tokens / step / chips if tokens else None,
            full_load_power_per_chip_W=power_per_chip_W,
            busy_share=busy_share if power_per_chip_W else None,
            power_per_chip_W=mean_W,
            energy_per_step_J=energy,
            energy_per_token_J=energy / tokens if tokens and energy is not None else None,
            cost_per_step_usd=cost,
            cost_per_million_tokens_usd=(
                cost / tokens * TOKENS_PER_MILLION if tokens and cost is not None else None
            ),
        )

    def row(self) -> dict[str, float]:
        """The known columns, in field order."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: value for name, value in values if value is not None}


__all__ = ["SECONDS_PER_HOUR", "TOKENS_PER_MILLION", "Economics"]
