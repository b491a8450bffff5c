"""The converter's config file: its quantization sections (`converter.quant.load_config`, then `validate`) and
its `[train_param]` section (`converter.train.config.load_train_config`): each reads the same bytes and may
refuse them on its own."""
from __future__ import annotations

from converter.quant.config import load_config
from converter.train.config import load_train_config
from lite.status import LiteError
from tests.fuzz.contract import contract
from tests.fuzz.scratch import scratch_file


def _quant(path: str) -> None:
    load_config(path).validate()


def _parse(data: bytes) -> None:
    """Both parsers of a config file."""
    with scratch_file(".cfg", data) as path:
        for parse in (_quant, load_train_config):
            try:
                parse(path)
            except LiteError:
                pass


TestOneInput = contract(_parse)
