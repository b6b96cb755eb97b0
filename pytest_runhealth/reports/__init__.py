"""Reports people look at: an HTML page with inline SVG plots
(``--runhealth-html``) and a Markdown summary for CI (``--runhealth-markdown``),
both built from the session's health results and what the checks read."""
