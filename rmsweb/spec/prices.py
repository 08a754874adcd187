"""Token prices: what a call to a model costs, for the report's dollars per task."""

from __future__ import annotations

from pydantic import Field

from .common import SpecModel


class TokenPrices(SpecModel):
    """US dollars per million tokens (0 for self-hosted models, unless you price the GPUs)."""

    input_usd_per_mtok: float = Field(
        0.0, ge=0, description="Price of one million prompt tokens, in US dollars."
    )
    output_usd_per_mtok: float = Field(
        0.0, ge=0, description="Price of one million completion tokens, in US dollars."
    )

    def cost_usd(self, tokens_in: int, tokens_out: int) -> float:
        """Dollars for `tokens_in` prompt and `tokens_out` completion tokens."""
        return (tokens_in * self.input_usd_per_mtok + tokens_out * self.output_usd_per_mtok) / 1e6
