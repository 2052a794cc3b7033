"""The demo server's media: a 1x1 PNG and a short silent WAV, built in code (no files to ship)."""

from __future__ import annotations

import struct
import zlib
from typing import Final

__all__ = ["PNG_BYTES", "WAV_BYTES"]


def _png_1x1() -> bytes:
    """Build a valid 1x1 RGBA PNG (one transparent pixel)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    pixels = zlib.compress(b"\x00" + b"\x00\x00\x00\x00")  # filter byte + one pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence(samples: int = 80, rate: int = 8000) -> bytes:
    """Build a valid mono 8-bit PCM WAV of ``samples`` silent samples (10 ms at 8 kHz)."""
    data = b"\x80" * samples  # 8-bit PCM is unsigned; 0x80 is silence
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


PNG_BYTES: Final = _png_1x1()
WAV_BYTES: Final = _wav_silence()
