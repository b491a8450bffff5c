"""Graph passes, each a small function `graph -> None` that keeps the graph's meaning and can run alone."""
from converter.passes.pipeline import PASSES, optimize

__all__ = ["PASSES", "optimize"]
