"""Line patterns shared by the two ``nvidia-smi nvlink`` parsers (``-s`` status and ``-e`` errors):
the per-GPU heading, the capability lines of ``nvlink -c``, the start of ``nvidia-smi -q``, a shell
prompt and nvidia-smi's own messages."""

from __future__ import annotations

import re

GPU_RE = re.compile(r"^\s*GPU\s+(\d+)\s*:\s+(.*?)\s*(?:\(\s*UUID\s*:\s*([^)]*?)\s*\))?\s*$")
CAPS_RE = re.compile(r"^\s*Link\s+\d+\s*,\s*.+:\s*(true|false)\s*$", re.I)
SMI_Q_RE = re.compile(r"^\s*(==============NVSMI LOG==============|Timestamp\s*:|Driver Version\s*:|Attached GPUs\s*:)")
PROMPT_RE = re.compile(r"^\s*(?:.*[$#>]\s*)?(?:sudo\s+)?nvidia-smi\b")
MESSAGE_RE = re.compile(r"^\s*(NVML|Failed|Unable|No devices|Error|NVLink)\b", re.I)
