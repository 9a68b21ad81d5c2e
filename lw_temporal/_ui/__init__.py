"""The review page (``lw-temporal ui``): pending approvals with approve and deny, dreams
with their diffs and per-file approval, memory stores (files, versions, diffs, audit)
and run trees with their manifests, by concern: who may use it and the checks every
request passes (``_guard``), the routes (``_app``), what each page reads (``_views``),
the server (``_serve``); templates and the stylesheet ship with the package.

Needs the ``ui`` extra (Starlette, Jinja2, uvicorn).
"""
