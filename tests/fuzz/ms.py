"""Our `.ms` files, plain, with an integrity footer or encrypted (with `KEY`): import, verify, compile and run."""
from __future__ import annotations

from lite import protect
from lite.tools.fuzz import _run_once
from tests.fuzz.contract import contract

KEY = bytes(range(32))


def _load(data: bytes) -> None:
    """Import (decrypting with KEY when the buffer says it is encrypted), compile and run once."""
    _run_once(data, KEY if protect.is_encrypted(data) else None)


TestOneInput = contract(_load)
