"""Protobuf string fields that are not UTF-8 text. proto2 files (ONNX, MINDIR) leave them unchecked when parsed,
and protobuf then hands such a field over as bytes (or fails as a map is read), which no name lookup expects."""
from __future__ import annotations

from google.protobuf.message import Message


def undecodable_field(message: Message) -> str | None:
    """`Message.field` of the first string field in `message` (nested messages included) that is not UTF-8 text,
    or None."""
    for field, value in message.ListFields():
        if field.type not in (field.TYPE_MESSAGE, field.TYPE_STRING):
            continue                                 # numbers and bytes: nothing to decode, and often many
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            try:                                     # a map decodes its strings as it is read
                values = [item for pair in value.items() for item in pair]
            except UnicodeDecodeError:
                return f"{message.DESCRIPTOR.name}.{field.name}"
        else:
            values = value if field.is_repeated else (value,)
        for item in values:
            found = undecodable_field(item) if isinstance(item, Message) else (
                f"{message.DESCRIPTOR.name}.{field.name}" if isinstance(item, bytes) else None)
            if found:
                return found
    return None
