"""The console: `coffer ui`, a local web app over the same use cases as the CLI (coffer.manage).

Modules:

    app         the guarded Starlette app on a loopback port, and the URL with its token
    guard       who may talk to it: a loopback Host, a same-origin Origin, the token
    api         the JSON API: each route one use case of coffer.manage or a log query

It listens on 127.0.0.1 only, answers only a browser that holds the token it printed (as a cookie once
the URL with the token was opened), checks Host and Origin, and reads the vault afresh on every request,
so a CLI or a second console editing at the same time is seen at once and nothing is lost (every write
goes through the registry's lock). The page is static HTML, CSS and JavaScript shipped in the package
(`static/`): no build step, no library, charts are plain SVG. It imports manage/ and the parts below it;
only the CLI imports it.
"""
