"""Content-Encoding decoded in bounded pieces, so a size cap counts decoded bytes.

httpx decodes each raw chunk whole: a 3.5 kB reply with ``Content-Encoding:
gzip, gzip`` came out of one ``iter_bytes()`` step as gigabytes, before any cap
could count it. Here every layer inflates at most ``piece`` bytes per step and
hands them on lazily, so the caller's cap on the decoded total stops the whole
chain within ``piece`` bytes per layer, whatever the encodings stacked."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

PIECE = 64 << 10
MAX_LAYERS = 4  # stacked encodings undone at most ("gzip, gzip" is legal; 1,500 layers are an attack)
ACCEPT_ENCODING = "gzip, deflate"  # what the decoder below knows; sent so servers pick one of these


class UnsupportedEncoding(ValueError):
    """The server used a Content-Encoding this client did not offer."""


def encodings(header: str | None) -> list[str]:
    """``"gzip, gzip"`` -> ``["gzip", "gzip"]`` in the order they were applied."""
    return [e.strip().lower() for e in (header or "").split(",") if e.strip() and e.strip().lower() != "identity"]


def _inflate(chunks: Iterable[bytes], wbits: int, piece: int) -> Iterator[bytes]:
    d = zlib.decompressobj(wbits)
    for chunk in chunks:
        data = chunk
        while data:
            out = d.decompress(data, piece)
            if out:
                yield out
            data = d.unconsumed_tail
            if d.eof and d.unused_data:  # a gzip stream of several members
                data, d = d.unused_data, zlib.decompressobj(wbits)
        while True:  # output zlib still holds for the input already given
            out = d.decompress(b"", piece)
            if not out:
                break
            yield out


def _deflate(chunks: Iterable[bytes], piece: int) -> Iterator[bytes]:
    """HTTP "deflate" is zlib-wrapped by the standard, raw by some servers."""
    it = iter(chunks)
    first = b""
    for first in it:
        if first:
            break
    if not first:
        return
    zlib_wrapped = len(first) >= 2 and (first[0] & 0x0F) == 8 and ((first[0] << 8) | first[1]) % 31 == 0
    yield from _inflate(_chain(first, it), zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS, piece)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def decoded_chunks(raw: Iterable[bytes], content_encoding: str | None, piece: int = PIECE) -> Iterator[bytes]:
    """The body decoded, in pieces of at most ``piece`` bytes; raises
    ``UnsupportedEncoding`` or ``zlib.error`` for what cannot be decoded."""
    stream: Iterable[bytes] = raw
    layers = encodings(content_encoding)
    if len(layers) > MAX_LAYERS:  # each layer is a generator inside the next: 1,500 would overflow the stack
        raise UnsupportedEncoding(f"{len(layers)} stacked Content-Encoding layers; at most {MAX_LAYERS} are decoded")
    for name in reversed(layers):  # the last applied is undone first
        if name in ("gzip", "x-gzip"):
            stream = _inflate(stream, 16 + zlib.MAX_WBITS, piece)
        elif name == "deflate":
            stream = _deflate(stream, piece)
        else:
            raise UnsupportedEncoding(f"Content-Encoding {name!r} was not offered (Accept-Encoding: {ACCEPT_ENCODING})")
    return iter(stream)
