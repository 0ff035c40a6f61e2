"""Compression: windows of turns become self-contained memory entries (offline now, an LLM later)."""
from shared.compress.model import Compressor, Draft, Window
from shared.compress.offline import IMAGE_CAPTION_KEY, OfflineCompressor

__all__ = ["IMAGE_CAPTION_KEY", "Compressor", "Draft", "OfflineCompressor", "Window"]
