"""The committed generated code is what flatc makes of the schema, and the verifier's view of it is right."""
from __future__ import annotations

import tempfile
from pathlib import Path

from schema import fb, regenerate
from schema.fbs_layout import load


def test_committed_code_matches_schema() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        produced = regenerate.generate(Path(tmp)).read_text()
    assert produced == regenerate.GENERATED.read_text(), "run `python -m schema.regenerate`"


def test_layout_slots_match_generated_accessors() -> None:
    """Each field's vtable slot, as the verifier computes it, is the offset flatc's reader uses."""
    import inspect
    import re
    layout = load()
    for table, fields in layout.tables.items():
        cls = getattr(fb, table)
        for f in fields:
            camel = "".join(p[:1].upper() + p[1:] for p in f.name.split("_"))
            source = inspect.getsource(getattr(cls, camel + ("Type" if f.kind == "union" else "")))
            offset = int(re.search(r"Offset\((\d+)\)", source).group(1))
            assert offset == 4 + 2 * f.slot, (table, f.name)


def test_every_union_member_is_a_table() -> None:
    layout = load()
    assert layout.root == "MetaGraph"
    for member in layout.unions["Primitive"]:
        assert member in layout.tables
        assert getattr(fb.Primitive, member) == layout.unions["Primitive"].index(member) + 1
