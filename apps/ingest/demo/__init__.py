"""The bundled demo: real captures (``captures/``, ``demo.json``) and the generated fleet (``fleet.py``)."""
