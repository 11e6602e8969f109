"""`thresher serve`: a read-only web dashboard and archive browser over the store.

One concept per module: `app` (the aiohttp application, its routes and security
headers), `data` (what each page reads, as plain data, through serve.sql), `threads`
(messages to threads), `mail` (one message made fit to show), `warcread` (one WARC
record read back), `charts` (SVG drawn on the server), `metrics` (Prometheus text),
`auth` (who may look), `templates` (Jinja2, autoescaped). See docs/serve.md.
"""

__all__: list[str] = []
