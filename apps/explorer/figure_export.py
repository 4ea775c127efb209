"""A snapshot's drawings as files, server-side: SVG always, PNG where plotly can render one here.

``FIGURES``: ``host`` (the host drawing, ``figures.host_spec``), ``gpu_matrix`` and ``nic_matrix``
(``figures.gpu_matrix_spec``, ``nic_matrix_spec``). ``render(doc, name, fmt) -> (bytes, content type)``:

* ``svg``: topoweb's own writer (``figure_svg.spec_svg``): no browser, works air-gapped.
* ``png``: ``plotly.io.to_image`` through kaleido, which drives a Chromium it must find on the
  server (``BROWSER_PATH``, else ``/usr/bin/chromium`` when present; nothing is downloaded and
  nothing leaves the machine). kaleido is in requirements.txt, the browser is the system's; where
  either is missing :class:`PngUnavailable` says which (the API answers 501). In the browser every figure keeps Plotly's own "download as PNG" button.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from apps.explorer import figures
from apps.explorer.figure_svg import spec_svg

__all__ = ["FIGURES", "FORMATS", "PngUnavailable", "render", "png_bytes"]

FIGURES: dict[str, Callable[[Mapping], dict]] = {
    "host": figures.host_spec, "gpu_matrix": figures.gpu_matrix_spec, "nic_matrix": figures.nic_matrix_spec}
FORMATS = ("svg", "png")
SYSTEM_CHROMIUM = "/usr/bin/chromium"
WIDTH = 1100


class PngUnavailable(RuntimeError):
    """PNG cannot be drawn on this server; the message says why and that SVG can."""


def png_bytes(spec: Mapping) -> bytes:
    """The spec as PNG through kaleido (see the module docstring); :class:`PngUnavailable` when it cannot."""
    try:
        import kaleido  # noqa: F401  (an optional dependency: only its presence is checked here)
    except ImportError:
        raise PngUnavailable("PNG export needs the kaleido package and a Chromium on the server; kaleido is not "
                             "installed here. The .svg of the same figure works without them.") from None
    if not os.environ.get("BROWSER_PATH") and os.path.exists(SYSTEM_CHROMIUM):
        os.environ["BROWSER_PATH"] = SYSTEM_CHROMIUM
    import plotly.io as pio
    try:
        return pio.to_image(figures.as_figure(spec), format="png", width=WIDTH)
    except Exception as exc:  # kaleido raises its own types (no browser found, browser failed)
        raise PngUnavailable(f"PNG export failed on this server ({type(exc).__name__}: {str(exc)[:200]}); "
                             "the .svg of the same figure works without a browser.") from None


def render(doc: Mapping, name: str, fmt: str) -> tuple[bytes, str]:
    """``(body, content type)`` of figure ``name`` of a snapshot document as ``fmt`` (``svg``/``png``)."""
    if name not in FIGURES:
        raise KeyError(f"no figure {name!r}: one of {', '.join(FIGURES)}")
    if fmt not in FORMATS:
        raise KeyError(f"no format {fmt!r}: one of {', '.join(FORMATS)}")
    spec = FIGURES[name](doc)
    if fmt == "svg":
        return spec_svg(spec, width=WIDTH).encode("utf-8"), "image/svg+xml; charset=utf-8"
    return png_bytes(spec), "image/png"
